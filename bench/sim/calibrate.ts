// Prints the field report's five figures measured against one replica, next to the targets:
// `npx tsx bench/sim/calibrate.ts [knob flags] [--voice-turns N] [--skip-single] [--skip-voice]`.
// Knob flags (see `npm run sim -- --help`) override the defaults, for exploring a re-fit.

import { parseArgs } from 'node:util';
import { measureFresh, measureRepeat, measureTiny, PROBE_TOKENS, TARGETS, within } from './calibration.js';
import { startReplica } from './index.js';
import { KNOB_OPTIONS, knobsFromArgs } from './knob-args.js';
import { keepAliveAgent, median, percentile } from './probe.js';
import { runVoice, VOICE_DEFAULTS } from './voice.js';

const { values } = parseArgs({
  options: {
    ...KNOB_OPTIONS,
    'voice-turns': { type: 'string', default: String(VOICE_DEFAULTS.turns) },
    'voice-think': { type: 'string', default: VOICE_DEFAULTS.thinkMs.join('-') },
    'voice-system-tokens': { type: 'string', default: String(VOICE_DEFAULTS.systemTokens) },
    'voice-spread': { type: 'string', default: String(VOICE_DEFAULTS.startSpreadMs) },
    'skip-voice': { type: 'boolean', default: false },
    'skip-single': { type: 'boolean', default: false },
  },
});
const range = (s: string) => s.split('-').map(Number) as [number, number];

function row(label: string, measured: number, target: number): string {
  const dev = ((measured - target) / target) * 100;
  const ok = within(measured, target) ? 'ok' : 'OFF';
  const sign = dev >= 0 ? '+' : '';
  return (
    `${label.padEnd(40)} ${measured.toFixed(1).padStart(7)} ms   target ${String(target).padStart(4)} ms   ` +
    `${sign}${dev.toFixed(1).padStart(5)}%  ${ok}`
  );
}

async function single(url: string, agent: ReturnType<typeof keepAliveAgent>): Promise<void> {
  const t = PROBE_TOKENS;
  console.log(row(`tiny ~${t.tiny}-token prompt, warm`, await measureTiny(url, agent), TARGETS.tiny));
  console.log(row(`fresh ${t.fresh1k}-token prompt`, await measureFresh(url, agent, t.fresh1k, 7), TARGETS.fresh1k));
  console.log(row(`cold ${t.cold5k}-token prefill`, await measureFresh(url, agent, t.cold5k, 3), TARGETS.cold5k));
  const repeat = await measureRepeat(url, agent, t.repeat9k);
  console.log(row(`repeated ${t.repeat9k}-token prefix (2nd send)`, repeat, TARGETS.repeat9k));
}

const knobs = knobsFromArgs(values);
const overridden = Object.keys(knobs).filter((k) => k !== 'faults');
const replica = await startReplica(knobs);
const agent = keepAliveAgent();
try {
  const settings = overridden.length ? `overridden: ${overridden.join(', ')}` : 'default settings';
  console.log(`one replica, ${settings} (${replica.config.model}, ${replica.config.kvBlocks} KV blocks)\n`);
  if (!values['skip-single']) await single(replica.url, agent);
  if (!values['skip-voice']) {
    replica.reset();
    const v = await runVoice({
      ...VOICE_DEFAULTS,
      turns: Number(values['voice-turns']),
      thinkMs: range(values['voice-think'] as string),
      systemTokens: Number(values['voice-system-tokens']),
      startSpreadMs: Number(values['voice-spread']),
      url: replica.url,
      agent,
    });
    console.log(row(`50 voice sessions, p50 (n=${v.ttfts.length})`, median(v.ttfts), TARGETS.voiceP50));
    console.log(row('50 voice sessions, p95', percentile(v.ttfts, 95), TARGETS.voiceP95));
    console.log(
      `\nvoice run: ${(v.durationMs / 1000).toFixed(1)} s, ${v.errors} errors, ` +
        `mean cached share ${(v.cachedShare * 100).toFixed(1)}%, p99 ${percentile(v.ttfts, 99).toFixed(1)} ms, ` +
        `max ${Math.max(...v.ttfts).toFixed(1)} ms, preemptions ${replica.counters().preemptions}`,
    );
  }
} finally {
  agent.destroy();
  await replica.close();
}
