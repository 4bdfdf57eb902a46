/**
 * npm run bench:messages [-- --real] — do Anthropic SDK conversations through warmroute get the
 * prefix cache as the same conversations over the chat API do, and does the SDK raise every
 * failure mid-stream? One run, one fleet:
 *  1. the same workload (agents' system prompts, callers' turns) four times: Anthropic's SDK on
 *     /v1/messages and OpenAI's on /v1/chat/completions, each keyed (x-session-id) and keyless,
 *     every replica's prefix cache emptied and a new gateway started before each; the hit rate of each from the replicas' own
 *     counters (vllm:prefix_cache_hits / queries, the difference over the arm). Rounds rotate the
 *     arms' order, each round its own prompts.
 *  2. failures injected mid-stream: a proxy in front of each replica kills chosen streams after 1–4
 *     SSE events; how each SDK ended them: raised (its APIError, or another error), recovered
 *     whole, or silent (returned as if whole). Exits 1 on any silent end.
 * The simulated fleet by default (2 replicas whose KV caches hold 6K tokens each, as the real
 * one's); `--real`: the real vLLM fleet of `npm run fleet:vllm`, started if it is not running.
 * Writes bench/out/messages.{json,md}.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fmt, percentiles } from '../lib/percentiles.js';
import { ensureFleet } from '../real/fleet-vllm.js';
import { simFleet, vllmFleet, type PeerFleet } from '../peers/fleet.js';
import { startGateway } from '../voice/fleet.js';
import { buildWorkload, type WorkloadOptions } from '../voice/workload.js';
import { APIS, inject, runArm, type Api, type Injection, type Target, type TurnResult } from './conversations.js';
import { startCutProxy } from './cut-proxy.js';

const USAGE = `usage: npm run bench:messages -- [--real] [--replicas N (2)] [--sessions N (12)] [--turns N (4)] [--groups N (6)]
       [--system-tokens A-B (1500-2300, the served model's tokens)] [--max-tokens N (sim 64, real 16)] [--errors N (20 per API)]
       [--rounds N (2)] [--kv-blocks N (sim: 384, 6K tokens)] [--out DIR (bench/out)]`;

const s = { type: 'string' } as const;
const { values: a } = parseArgs({
  options: {
    real: { type: 'boolean', default: false }, replicas: s, sessions: s, turns: s, groups: s, 'system-tokens': s, 'max-tokens': s,
    errors: s, rounds: s, 'kv-blocks': s, out: s, help: { type: 'boolean', short: 'h' },
  },
});
if (a.help) {
  console.log(USAGE);
  process.exit(0);
}

function int(v: string | undefined, name: string, dflt: number, min = 1): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} wants an integer ≥ ${min}, got ${v}\n${USAGE}`);
  return n;
}

const REPLICAS = int(a.replicas, 'replicas', 2);
const ROUNDS = int(a.rounds, 'rounds', 2);
const ERRORS = int(a.errors, 'errors', 20, 0);
const MAX_TOKENS = int(a['max-tokens'], 'max-tokens', a.real ? 16 : 64);
const [sysLo, sysHi] = (a['system-tokens'] ?? '1500-2300').split('-').map(Number);
if (!(sysLo > 0 && sysHi >= sysLo)) throw new Error(`--system-tokens wants A-B with 0 < A ≤ B\n${USAGE}`);
const OUT = a.out ?? 'bench/out';
const progress = (m: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${m}\n`);

let fleet: PeerFleet;
if (a.real) {
  progress(`the real vLLM fleet: ${REPLICAS} replicas (started if not running)`);
  await ensureFleet(REPLICAS);
  const f = await vllmFleet();
  if (typeof f === 'string') throw new Error(f);
  fleet = f;
} else {
  const kvBlocks = int(a['kv-blocks'], 'kv-blocks', 384);
  progress(`${REPLICAS} simulated replicas, ${kvBlocks} KV blocks each`);
  fleet = await simFleet(REPLICAS, [20, 60], kvBlocks, true);
}
// Prompt sizes are the served model's tokens; the workload counts 4 characters a token.
const ratio = await fleet.tokenRatio();
const workloadOf = (seed: number): ReturnType<typeof buildWorkload> => buildWorkload({
  sessions: int(a.sessions, 'sessions', 12), turns: int(a.turns, 'turns', 4), groups: int(a.groups, 'groups', 6),
  systemTokens: [Math.round(sysLo / ratio), Math.round(sysHi / ratio)] as WorkloadOptions['systemTokens'],
  userTokens: [Math.round(10 / ratio), Math.round(30 / ratio)], toolTurnShare: 0, keylessShare: 0, bodyKeyShare: 0,
  thinkMs: [200, 600], startSpreadMs: 2000, seed,
});

const proxies = await Promise.all(fleet.urls.map((u) => startCutProxy(u)));
/**
 * A gateway of its own for `f`, in front of the proxies: each arm starts from what a new gateway
 * knows (nothing), as it starts from emptied caches. One gateway for all would carry an arm's
 * pins and prefix index into the next, and take the simulator's reset (its counters zeroed) for a
 * restart, which it answers by warming the replica with the hottest prompts it saw: the next arm's own.
 * Health probes pass through the proxies, which share this process with every client: on a loaded
 * machine a probe may wait for it past the default 1 s, and a replica counted down would turn the
 * arm into a count of 503s. The figures here are about caching and errors, not health.
 */
async function withGateway<T>(f: (t: Target) => Promise<T>): Promise<T> {
  const gateway = await startGateway(proxies.map((p) => p.url), 'affinity', [], fleet.kvEvents, { health: { probeTimeoutMs: 5_000, unhealthyThreshold: 5 } });
  try {
    return await f({ url: gateway.url, model: fleet.model, maxTokens: MAX_TOKENS });
  } catch (e) {
    const replicas = await fetch(`${gateway.adminUrl}/admin/replicas`).then((r) => r.text()).catch(() => '(no answer)');
    progress(`failed; the gateway's replicas: ${replicas}\nits last output:\n${gateway.died() ?? gateway.lastOutput()}`);
    throw e;
  } finally {
    await gateway.stop();
  }
}

interface ArmRow { round: number; api: Api; keyed: boolean; queries: number; hits: number; hitRate: number; ttft: ReturnType<typeof percentiles>; routes: Record<string, number> }

const rows: ArmRow[] = [];
/** Every turn's client TTFT per arm (`${api} ${keyed}`), over all rounds. */
const ttfts = new Map<string, number[]>();
const arms = APIS.flatMap((api) => [true, false].map((keyed) => ({ api, keyed })));
let resets = true;
for (let round = 0; round < ROUNDS; round++) {
  // Each round its own prompts; the arms in another order each round, so none always goes first.
  const w = workloadOf(round + 1);
  const order = round % 2 === 0 ? arms : [...arms].reverse();
  for (const { api, keyed } of order) {
    if (!(await fleet.reset()) && resets) {
      resets = false;
      progress('warning: the fleet cannot empty its prefix caches (a vLLM outside dev mode): each arm after the first starts with the ones before it in cache');
    }
    progress(`round ${round + 1}/${ROUNDS}: ${api} ${keyed ? 'keyed' : 'keyless'}, ${w.sessions.length} sessions × ${w.options.turns} turns`);
    await withGateway(async (target) => {
      const before = await fleet.prefixCounters();
      const turns: TurnResult[] = await runArm(api, target, w, keyed);
      const after = await fleet.prefixCounters();
      const queries = after.queries - before.queries;
      const hits = after.hits - before.hits;
      const routes: Record<string, number> = {};
      for (const t of turns) routes[t.route] = (routes[t.route] ?? 0) + 1;
      rows.push({ round, api, keyed, queries, hits, hitRate: queries > 0 ? hits / queries : 0, ttft: percentiles(turns.map((t) => t.ttftMs)), routes });
      ttfts.set(`${api} ${keyed}`, [...(ttfts.get(`${api} ${keyed}`) ?? []), ...turns.map((t) => t.ttftMs)]);
      progress(`  hit rate ${(100 * (queries > 0 ? hits / queries : 0)).toFixed(1)}% (${hits} of ${queries} prompt tokens)`);
    });
  }
}

const injections: Partial<Record<Api, Injection>> = {};
const wasCut = (id: string) => proxies.some((p) => p.cut.has(id));
for (const api of ERRORS > 0 ? APIS : []) {
  progress(`injecting ${ERRORS} mid-stream failures into ${api} streams`);
  injections[api] = await withGateway((target) => inject(api, target, workloadOf(1000), ERRORS, wasCut));
}

await Promise.all(proxies.map((p) => p.close()));
await fleet.stop();

// ---- report ----

const sum = (api: Api, keyed: boolean) => {
  const rs = rows.filter((r) => r.api === api && r.keyed === keyed);
  const q = rs.reduce((x, r) => x + r.queries, 0);
  const h = rs.reduce((x, r) => x + r.hits, 0);
  return { rate: q > 0 ? h / q : 0, queries: q, hits: h, rounds: rs.map((r) => r.hitRate) };
};
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const label = (api: Api) => (api === 'messages' ? 'Messages, Anthropic SDK' : 'chat, OpenAI SDK');
const w0 = workloadOf(1);
const lines = [
  `# Anthropic Messages against chat, same conversations (${new Date().toISOString().slice(0, 16)}Z)`,
  '',
  `\`npm run bench:messages${a.real ? ' -- --real' : ''}\`: ${fleet.kind === 'sim' ? 'simulated' : 'real vLLM'} fleet of ${fleet.urls.length} replicas (${fleet.model}); ` +
    `${w0.sessions.length} sessions × ${w0.options.turns} turns over ${w0.options.groups} agents' system prompts of ${sysLo}–${sysHi} tokens, ` +
    `streamed, max_tokens ${MAX_TOKENS}; ${ROUNDS} round(s), each arm from emptied prefix caches${resets ? '' : ' (NOT emptied: this fleet cannot)'}.`,
  '',
  '| API | keys | prefix-cache hit rate (replicas\' counters) | per round | prompt tokens | TTFT p50 / p90 ms (client) | routes |',
  '|---|---|---:|---|---:|---:|---|',
  ...arms.map(({ api, keyed }) => {
    const x = sum(api, keyed);
    const rs = rows.filter((r) => r.api === api && r.keyed === keyed);
    const p = percentiles(ttfts.get(`${api} ${keyed}`) ?? []);
    const routes: Record<string, number> = {};
    for (const r of rs) for (const [k, v] of Object.entries(r.routes)) routes[k] = (routes[k] ?? 0) + v;
    return `| ${label(api)} | ${keyed ? 'x-session-id' : 'none'} | ${pct(x.rate)} | ${x.rounds.map(pct).join(', ')} | ${x.queries} | ${fmt(p.p50, 0)} / ${fmt(p.p90, 0)} | ${Object.entries(routes).map(([k, v]) => `${k} ${v}`).join(', ')} |`;
  }),
  '',
  `Messages ÷ chat hit rate: keyed ${fmt(sum('messages', true).rate / sum('chat', true).rate, 3)}, keyless ${fmt(sum('messages', false).rate / sum('chat', false).rate, 3)}.`,
];
let silent = 0;
if (ERRORS > 0) {
  lines.push('', '| failures injected mid-stream | injected | raised as the SDK\'s APIError | raised otherwise | recovered whole | silent ends | error types |', '|---|---:|---:|---:|---:|---:|---|');
  for (const api of APIS) {
    const x = injections[api]!;
    silent += x.silent;
    const n = x.raisedApiError + x.raisedOther + x.recovered + x.silent;
    lines.push(`| ${label(api)} | ${n} | ${x.raisedApiError} | ${x.raisedOther} | ${x.recovered} | ${x.silent} | ${Object.entries(x.errorTypes).map(([k, v]) => `${k} ${v}`).join(', ')} |`);
  }
  lines.push('', `Each failure: the stream's connection to the replica killed after 1–4 SSE events (a proxy in front of every replica), one request at a time. Silent ends: ${silent}.`);
}
const report = lines.join('\n');
console.log(report);
mkdirSync(OUT, { recursive: true });
writeFileSync(`${OUT}/messages.json`, JSON.stringify({ when: new Date().toISOString(), fleet: { kind: fleet.kind, replicas: fleet.urls.length, model: fleet.model, tokenRatio: ratio }, maxTokens: MAX_TOKENS, workload: w0.options, resets, rows, injections }, null, 2));
writeFileSync(`${OUT}/messages.md`, `${report}\n`);
process.exit(silent > 0 ? 1 : 0);
