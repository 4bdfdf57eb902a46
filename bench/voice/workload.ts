// The voice workload as a plan: groups of sessions that share a byte-stable system prompt and tool
// set (one voice agent each), and per session its key mode, start time, and per turn the caller's
// utterance, whether it asks for a tool, and the think time after the answer. Everything comes from
// the seed, so two runs (and two strategies) send the same conversations; the answers come from
// the simulator, itself deterministic in (seed, prompt).

import { createRng } from '../sim/hash.js';

export interface WorkloadOptions {
  sessions: number;
  turns: number;
  /** Voice agents: each has its own system prompt and tools, shared by its sessions. */
  groups: number;
  /** System prompt length per group in tokens (≈4 chars each), uniform. */
  systemTokens: [number, number];
  /** Caller utterance length in tokens, uniform. */
  userTokens: [number, number];
  /** Share of turns (after the first) where the caller's request makes the agent call a tool. */
  toolTurnShare: number;
  /** Share of sessions sent with no session key at all. */
  keylessShare: number;
  /** Share of the keyed sessions that send their key as body `prompt_cache_key` instead of `x-session-id`. */
  bodyKeyShare: number;
  /** Pause between an answer's end and the next utterance, uniform. */
  thinkMs: [number, number];
  /** Sessions start spread over this window: uniformly, or with a rising rate (startRamp). */
  startSpreadMs: number;
  /** Sessions start at a linearly rising rate over the window (a load ramp), not uniformly. */
  startRamp: boolean;
  seed: number;
}

export const WORKLOAD_DEFAULTS: WorkloadOptions = Object.freeze({
  sessions: 50,
  turns: 10,
  groups: 5,
  systemTokens: [2000, 6000] as [number, number],
  userTokens: [10, 40] as [number, number],
  toolTurnShare: 0.1,
  keylessShare: 0.3,
  bodyKeyShare: 0.33,
  thinkMs: [800, 2000] as [number, number],
  startSpreadMs: 2000,
  startRamp: false,
  seed: 1,
});

export type KeyMode = 'header' | 'body' | 'none';

export interface Tool {
  type: 'function';
  function: { name: string; description: string; parameters: { type: 'object'; properties: Record<string, { type: string }> } };
}

export interface GroupPlan {
  index: number;
  domain: string;
  system: string;
  tools: Tool[];
}

export interface TurnPlan {
  user: string;
  /** The tool the utterance asks for, or null. */
  tool: string | null;
  thinkMs: number;
}

export interface SessionPlan {
  index: number;
  id: string;
  group: number;
  keyMode: KeyMode;
  startMs: number;
  turns: TurnPlan[];
}

export interface Workload {
  options: WorkloadOptions;
  groups: GroupPlan[];
  sessions: SessionPlan[];
}

const DOMAINS = ['restaurant', 'clinic', 'bank', 'delivery', 'cityline', 'airline', 'hotel', 'telecom', 'insurance', 'pharmacy'];
// Words never starting with "call" or "tool": the simulator calls a tool when the utterance does.
const WORDS = ['yes', 'no', 'maybe', 'seven', 'thirty', 'Tuesday', 'please', 'change', 'booking', 'name', 'is',
  'Maria', 'two', 'people', 'window', 'seat', 'actually', 'make', 'it', 'eight', 'thanks', 'the', 'order',
  'address', 'street', 'number', 'tomorrow', 'morning', 'sorry', 'repeat', 'that', 'correct', 'wait', 'and'];
const RULES = ['Keep answers short and spoken.', 'Confirm names, numbers and dates by reading them back.',
  'Never read out internal identifiers.', 'Ask one question at a time.', 'If unsure, ask the caller to repeat.',
  'Use the tools to look up and change records.', 'Do not promise what the tools cannot do.',
  'Speak numbers digit by digit.', 'Apologise once, not repeatedly.', 'End the call politely when asked.'];

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
const span = (rnd: () => number, r: readonly [number, number]) => r[0] + rnd() * (r[1] - r[0]);

function words(rnd: () => number, chars: number, from: readonly string[], sep = ' '): string {
  let s = '';
  while (s.length < chars) s += pick(rnd, from) + sep;
  return s.slice(0, chars);
}

function toolsFor(domain: string): Tool[] {
  const fn = (name: string, description: string, properties: Record<string, { type: string }>): Tool => ({
    type: 'function',
    function: { name, description, parameters: { type: 'object', properties } },
  });
  return [
    fn(`${domain}_lookup`, `Look up the caller's ${domain} record`, { phone: { type: 'string' } }),
    fn(`${domain}_book`, `Book or change a ${domain} appointment`, { people: { type: 'integer' }, time: { type: 'string' } }),
    fn(`${domain}_confirm`, 'Confirm the details with the caller', {}),
  ];
}

function groupPlan(index: number, o: WorkloadOptions): GroupPlan {
  const rnd = createRng(o.seed * 7919 + index);
  const domain = `${DOMAINS[index % DOMAINS.length]}${index >= DOMAINS.length ? index : ''}`;
  const tokens = Math.round(span(rnd, o.systemTokens));
  const head = `You are the ${domain} voice agent on a phone line. `;
  return { index, domain, system: head + words(rnd, tokens * 4 - head.length, RULES), tools: toolsFor(domain) };
}

/** Exactly round(n × share) of n indices, chosen by the rng: shares hold on small runs too. */
function chooseSet(rnd: () => number, n: number, share: number, from: readonly number[]): Set<number> {
  const order = [...from];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return new Set(order.slice(0, Math.round(n * share)));
}

export function buildWorkload(opts: Partial<WorkloadOptions> = {}): Workload {
  const o: WorkloadOptions = { ...WORKLOAD_DEFAULTS, ...opts };
  if (!(o.sessions >= 1 && o.turns >= 1 && o.groups >= 1)) throw new Error('sessions, turns and groups must be ≥ 1');
  const groups = Array.from({ length: o.groups }, (_, g) => groupPlan(g, o));
  const rnd = createRng(o.seed);
  const all = Array.from({ length: o.sessions }, (_, i) => i);
  const keyless = chooseSet(rnd, o.sessions, o.keylessShare, all);
  const keyed = all.filter((i) => !keyless.has(i));
  const body = chooseSet(rnd, keyed.length, o.bodyKeyShare, keyed);
  const sessions = all.map((i): SessionPlan => {
    const r = createRng(o.seed * 1_000_003 + i);
    const group = i % o.groups;
    const tools = groups[group].tools;
    const turns = Array.from({ length: o.turns }, (_, t): TurnPlan => {
      const text = words(r, Math.round(span(r, o.userTokens)) * 4, WORDS);
      const wantsTool = t > 0 && r() < o.toolTurnShare;
      const tool = wantsTool ? pick(r, tools).function.name : null;
      return { user: tool ? `please call ${tool} ${text}` : text, tool, thinkMs: Math.round(span(r, o.thinkMs)) };
    });
    const keyMode: KeyMode = keyless.has(i) ? 'none' : body.has(i) ? 'body' : 'header';
    return { index: i, id: `voice-${o.seed}-${i}`, group, keyMode, startMs: Math.round((o.startRamp ? Math.sqrt(r()) : r()) * o.startSpreadMs), turns };
  });
  return { options: o, groups, sessions };
}
