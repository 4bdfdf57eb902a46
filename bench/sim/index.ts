// Public API of the vLLM fleet simulator; see README.md.

export {
  DEFAULT_MODEL,
  H100_CAPACITY,
  H100_TIMING,
  TINY_KV,
  resolveConfig,
  type CapacityKnobs,
  type OutputKnobs,
  type SimConfig,
  type SimReplicaOptions,
  type TimingKnobs,
} from './config.js';
export { parseFault, parseFaultArg, type Fault, type FaultKind } from './faults.js';
export { startFleet, type FleetOptions, type SimFleet } from './fleet.js';
export type { AbortRecord, RequestRecord } from './generate.js';
export { startReplica, type ReplicaCounters, type SimReplica } from './replica.js';
export { predictTtftMs } from './timing.js';
export { renderChat, CHARS_PER_TOKEN } from './tokenizer.js';
export { keepAliveAgent, messagesOfTokens, streamChat, streamRequest, type StreamResult } from './probe.js';
export { runVoice, VOICE_DEFAULTS, type VoiceOptions, type VoiceResult } from './voice.js';
export { TARGETS } from './calibration.js';
