// npm run bench:voice — the voice workload through round-robin, least-loaded, session-hash and
// warmroute, then the oracle placement (no gateway, session i → replica i mod R) as the reference,
// side by side on the same simulated fleet. Writes bench/out/voice-*.json, the HTML report and the
// markdown tables; prints the tables, the goals (met / NOT met; routing judged against the oracle
// placement of the same run) and the references.

import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { gatewaysOf, runBench, STRATEGIES, type BenchOptions } from './bench.js';
import { PRESETS, presetFlags } from './presets.js';
import { drainTable, runDrainScenario } from './drain.js';
import { startSimFleet } from './fleet.js';
import { checkReferences, goalLine, referenceLine } from './goals.js';
import { APIS, type Api } from './dialogue.js';
import { failureTable, fullTables } from './markdown.js';
import { writeVoiceOutputs } from './output.js';
import { createProgress } from './progress.js';
import { WORKLOAD_DEFAULTS } from './workload.js';
import { AGENTS, type AgentKind } from './orchestrated.js';
import { sharedMain, SHARED_USAGE } from './shared-main.js';

const W = WORKLOAD_DEFAULTS;
const USAGE = `usage: npm run bench:voice -- [flags]

 --preset NAME            ${Object.entries(PRESETS).map(([k, p]) => `${k}: ${p.about}`).join('\n                           ')}
                           (flags given beside a preset override its values)
  --api chat|responses     chat completions (default), or the Responses API: keyed sessions chain turns by
                           previous_response_id (store: true), keyless ones resend their history (store: false)
  --replicas N             simulated vLLM replicas (4)
  --sessions N             concurrent voice sessions (${W.sessions})
  --turns N                turns per session (${W.turns})
  --groups N               voice agents, each with its own system prompt and tools (${W.groups})
  --system-tokens A-B      system prompt tokens per agent (${W.systemTokens.join('-')})
  --user-tokens A-B        caller utterance tokens (${W.userTokens.join('-')})
  --output-tokens A-B      answer tokens, the simulator's natural length (50-150)
  --kv-blocks N            KV capacity per replica in 16-token blocks (the simulator's H100 default, 24576)
  --tool-turns F           share of turns that call a tool (${W.toolTurnShare})
  --keyless F              share of sessions sent without a key (${W.keylessShare})
  --body-key F             share of keyed sessions using body prompt_cache_key (${W.bodyKeyShare})
  --think-ms A-B           pause between an answer and the next utterance (${W.thinkMs.join('-')})
  --start-spread-ms N      sessions start spread over this window (${W.startSpreadMs})
  --start-ramp             sessions start at a linearly rising rate over that window (a load ramp)
  --strategies LIST        comma-separated (${STRATEGIES.join(',')}); oracle = no gateway, session i → replica i mod N;
                           affinity@N = N warmroute processes sharing one redis-server, each request to one at random
  --gateways N             fleet operations: warmroute with 1 and with N gateways side by side (affinity,affinity@N),
                           then the drain scenario (moved sessions' next turn with and without warm handoff)
  --max-duration-s N       per strategy: no new turn after this (300)
  --request-timeout-s N    per request (60)
  --no-warmup              skip the deploy-time warmup (every agent's prompt sent to every replica first)
  --agent single|orchestrated
                           the agent: one prompt per turn (default), or the field report's orchestrated
                           flow: per turn 0 calls (canned, 30%), 1 (30%) or 2–6 (classification,
                           relevance, location and time extraction at once, rewrite, then the answer)
  --budget-ms N            budget for requests and turns over budget (300)
  --seed N                 workload seed (${W.seed})
  --out DIR                output directory (bench/out)
${SHARED_USAGE}`;

function range(v: string | undefined, def: readonly [number, number], name: string): [number, number] {
  if (v === undefined) return [def[0], def[1]];
  const [a, b] = v.split('-').map(Number);
  const r: [number, number] = [a, b ?? a];
  if (!r.every(Number.isFinite) || r[0] > r[1] || r[0] < 0) throw new Error(`--${name} wants A-B with 0 ≤ A ≤ B, got ${v}`);
  return r;
}

function num(v: string | undefined, def: number, name: string, min = 0, max = Infinity): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} wants a number in [${min}, ${max}], got ${v}`);
  return n;
}

async function main(): Promise<number> {
  const s = { type: 'string' } as const;
  const { values: given } = parseArgs({
    options: {
      replicas: s, sessions: s, turns: s, groups: s, 'system-tokens': s, 'user-tokens': s, 'output-tokens': s, 'kv-blocks': s,
      'tool-turns': s, keyless: s, 'body-key': s, 'think-ms': s, 'start-spread-ms': s, strategies: s,
      'max-duration-s': s, 'request-timeout-s': s, 'budget-ms': s, seed: s, out: s, api: s, agent: s, gateways: s, 'no-warmup': { type: 'boolean' }, 'start-ramp': { type: 'boolean' }, preset: s, 'batch-share': s, 'batch-prompt-tokens': s, 'batch-output-tokens': s, 'batch-ignore-eos': { type: 'boolean' }, 'slots-per-replica': s, 'batch-prefill': s, 'long-prefill': s, fleet: s, help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  const a = { ...presetFlags(given.preset), ...given };
  if (a.help) {
    console.log(USAGE);
    return 0;
  }
  if (a['batch-share'] !== undefined) return sharedMain(a);
  const gateways = num(a.gateways, 1, 'gateways', 1, 8);
  const strategies = (a.strategies ?? (gateways > 1 ? `affinity,affinity@${gateways}` : STRATEGIES.join(','))).split(',').map((x) => x.trim()).filter(Boolean);
  for (const st of strategies) {
    if ((STRATEGIES as readonly string[]).includes(st)) continue;
    if (!/^affinity@\d+$/.test(st)) throw new Error(`unknown strategy ${st}; one of ${STRATEGIES.join(', ')} or affinity@N`);
    if (!(gatewaysOf(st) >= 2)) throw new Error(`${st}: affinity@N wants N ≥ 2 gateways (one gateway is plain affinity)`);
  }
  const api = (a.api ?? 'chat') as Api;
  if (!(APIS as readonly string[]).includes(api)) throw new Error(`--api wants ${APIS.join(' or ')}, got ${a.api}`);
  const agent = (a.agent ?? 'single') as AgentKind;
  if (!(AGENTS as readonly string[]).includes(agent)) throw new Error(`--agent wants ${AGENTS.join(' or ')}, got ${a.agent}`);
  if (agent === 'orchestrated' && api !== 'chat') throw new Error('--agent orchestrated runs over chat completions only');
  const o: BenchOptions = {
    api,
    agent,
    replicas: num(a.replicas, 4, 'replicas', 1, 64),
    strategies,
    outputTokens: range(a['output-tokens'], [50, 150], 'output-tokens'),
    kvBlocks: a['kv-blocks'] === undefined ? undefined : num(a['kv-blocks'], 0, 'kv-blocks', 64, 1e7),
    maxDurationS: num(a['max-duration-s'], 300, 'max-duration-s', 1, 3600),
    requestTimeoutS: num(a['request-timeout-s'], 60, 'request-timeout-s', 1, 600),
    budgetMs: num(a['budget-ms'], 300, 'budget-ms', 1),
    warmup: !a['no-warmup'],
    workload: {
      sessions: num(a.sessions, W.sessions, 'sessions', 1, 2000),
      turns: num(a.turns, W.turns, 'turns', 1, 200),
      groups: num(a.groups, W.groups, 'groups', 1, 1000),
      systemTokens: range(a['system-tokens'], W.systemTokens, 'system-tokens'),
      userTokens: range(a['user-tokens'], W.userTokens, 'user-tokens'),
      toolTurnShare: num(a['tool-turns'], W.toolTurnShare, 'tool-turns', 0, 1),
      keylessShare: num(a.keyless, W.keylessShare, 'keyless', 0, 1),
      bodyKeyShare: num(a['body-key'], W.bodyKeyShare, 'body-key', 0, 1),
      thinkMs: range(a['think-ms'], W.thinkMs, 'think-ms'),
      startSpreadMs: num(a['start-spread-ms'], W.startSpreadMs, 'start-spread-ms', 0),
      startRamp: a['start-ramp'] === true,
      seed: num(a.seed, W.seed, 'seed'),
    },
  };
  const progress = createProgress();
  const result = await runBench(o, progress);
  progress.done();
  const paths = writeVoiceOutputs(result, a.out ?? 'bench/out');
  const errors = result.summaries.reduce((n, x) => n + x.errors, 0);
  const lines = [...result.goals.map(goalLine), ...checkReferences(result.summaries).map(referenceLine)];
  const failures = errors > 0 ? `\n\n${failureTable(result.summaries, result.records)}` : '';
  process.stdout.write(`${fullTables(result.summaries)}${failures}\n\nGoals:\n${lines.map((l) => `  ${l}`).join('\n')}\n\n`);
  if (errors > 0) process.stdout.write(`${errors} request(s) failed; see the JSON for each one's error.\n`);
  process.stdout.write(`wrote ${paths.json}, ${paths.latestJson}, ${paths.md}\nreport: ${paths.html}\n`);
  if (gateways > 1) {
    const fleet = await startSimFleet(o.replicas, o.outputTokens, o.kvBlocks);
    try {
      const runs = await runDrainScenario(fleet, o.workload, { requestTimeoutMs: o.requestTimeoutS * 1000, maxDurationMs: o.maxDurationS * 1000 }, progress);
      progress.done();
      const table = drainTable(runs);
      process.stdout.write(`\nDrain scenario (the replica with the most pinned sessions drained once 40% of the requests are done; keyed sessions, no tool turns):\n\n${table}\n`);
      writeFileSync(`${a.out ?? 'bench/out'}/voice-drain-latest.json`, JSON.stringify(runs, null, 2));
      writeFileSync(`${a.out ?? 'bench/out'}/voice-drain-latest.md`, `${table}\n`);
    } finally {
      await fleet.stop();
    }
  }
  return 0;
}

/** The message and its causes: fetch's own message ("fetch failed") names neither the URL's fate nor why. */
function describe(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = (e as { code?: unknown }).code;
  return `${e.message}${typeof code === 'string' ? ` [${code}]` : ''}${e.cause === undefined ? '' : ` (cause: ${describe(e.cause)})`}`;
}

main().then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    process.stderr.write(`\nbench:voice: ${describe(e)}\n`);
    process.exitCode = 1;
  },
);
