// npm run bench:adapters -- --fleet sim|vllm  (--real is --fleet vllm)
//   [--sessions-per-agent 1] [--turns 6] [--max-tokens 16] [--system-tokens 300,500] [--seed 1]
//   [--strategies affinity,round-robin,session-hash,grouped,one-adapter (grouped-gateway, two-gateways on request)] [--no-on-demand] [--stats-ms 200]
//   [--rounds 1]
// The adapter fleet of the goals, over HTTP: two replicas with --max-loras 2, four adapters of
// equal traffic, each with three agents (system prompts), voice sessions of several turns, through
// warmroute, round-robin and session hash, and the same sessions sent as one adapter (no request
// ever waits for a slot: the baseline). TTFT p50/p90 of the warm turns (turn ≥ 1) and errors, in
// one run. Then on demand (adapters.sources, maxLoadedPerReplica 3): the first request of an
// adapter loaded nowhere (one load, measured), concurrent first requests of another (the same one
// load), and a rotation of 12 adapters over the two replicas (0 errors expected). With --rounds N
// every strategy runs N times, in alternating order (forward, then backward, ...), each round with
// prompts of its own: percentiles pooled over the rounds, and each round's ratio beside them, so a
// drift of the machine during the run weighs on every arm alike.
// `--fleet sim`: two simulated replicas on this host (seconds); `--fleet vllm`: the real CPU fleet
// (bench/real/fleet-vllm.ts), started or restarted with --lora 12 --max-loras 2 --lora-preload 4.
// Writes bench/out/adapters-fleet-<fleet>.json.

import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startReplica, type SimReplica } from '../sim/index.js';
import { call } from '../lib/http.js';
import { fmt, percentiles } from '../lib/percentiles.js';
import { sumBy, sumSamples } from '../lib/prom.js';
import { ensureFleet, loraFleetOf, type LoraFleet } from '../real/fleet-vllm.js';
import { SERVED_MODEL } from '../real/vllm-replica.js';
import { keepAliveAgent, streamChatExchange, type Exchange } from '../voice/client.js';
import { startGateway, type Gateway } from '../voice/fleet.js';
import { startRedis, type RedisChild } from '../../test/store/redis-server.js';
import { buildWorkload, WORKLOAD_DEFAULTS } from '../voice/workload.js';

/** The goals' fleet: two replicas, two slots each, four adapters in turn, on demand twelve. */
export const FLEET_BENCH = Object.freeze({ replicas: 2, maxLoras: 2, adapters: 4, agentsPerAdapter: 3, rotation: 12, maxLoadedPerReplica: 3 });
const STRATEGIES = ['affinity', 'round-robin', 'session-hash', 'grouped', 'grouped-gateway', 'two-gateways', 'one-adapter'] as const;
/** The arms run unless --strategies names them: grouped-gateway and two-gateways are asked for by name. */
const DEFAULT_STRATEGIES: readonly FleetStrategy[] = ['affinity', 'round-robin', 'session-hash', 'grouped', 'one-adapter'];
type FleetStrategy = (typeof STRATEGIES)[number];
const LABEL: Record<FleetStrategy, string> = { affinity: 'warmroute', 'round-robin': 'round-robin', 'session-hash': 'session hash', grouped: 'adapters grouped by hand (adapter a → replica a × R ÷ 4, no gateway)', 'grouped-gateway': 'the same split, each replica behind a gateway of its own', 'two-gateways': 'warmroute, two gateways on one redis-server, a session\'s turns alternating between them', 'one-adapter': 'the same sessions, one adapter (no slot waits)' };

export interface AdapterFleet {
  kind: 'sim' | 'vllm';
  urls: string[];
  /** The base model the replicas serve. */
  base: string;
  /** Every adapter (lora-0 ... lora-11) → its path as the replicas see it. */
  adapters: Record<string, string>;
  /** Longest a request may take (a CPU replica loading an adapter takes seconds). */
  requestTimeoutMs: number;
  stop(): Promise<void>;
}

/** lora-0 ... lora-(n-1), the names fleet:vllm gives the adapters it makes. */
const adapterNames = (n: number) => Array.from({ length: n }, (_, i) => `lora-${i}`);

/** The real CPU fleet with the goals' LoRA settings: ensureFleet starts it, or restarts one of other settings. */
export function vllmLora(): LoraFleet {
  return loraFleetOf({ count: FLEET_BENCH.rotation, maxLoras: FLEET_BENCH.maxLoras, maxCpuLoras: FLEET_BENCH.rotation, preload: FLEET_BENCH.adapters });
}

async function vllmFleet(): Promise<AdapterFleet> {
  const lora = vllmLora();
  const s = await ensureFleet(FLEET_BENCH.replicas, undefined, lora);
  // Left running, as fleet:vllm leaves it.
  return { kind: 'vllm', urls: s.replicas.map((r) => r.url), base: SERVED_MODEL, adapters: lora.adapters, requestTimeoutMs: 120_000, stop: async () => {} };
}

/** Two simulated replicas serving the first four adapters from start, the rest loadable at run time. */
export async function simFleet(): Promise<AdapterFleet> {
  const names = adapterNames(FLEET_BENCH.rotation);
  const adapters = Object.fromEntries(names.map((n) => [n, `/adapters/${n}`]));
  const preload = Object.fromEntries(names.slice(0, FLEET_BENCH.adapters).map((n) => [n, adapters[n]]));
  const sims: SimReplica[] = [];
  for (let i = 0; i < FLEET_BENCH.replicas; i++) {
    sims.push(await startReplica({ name: `sim-${i}`, model: 'base-m', maxLoras: FLEET_BENCH.maxLoras, maxCpuLoras: FLEET_BENCH.rotation, loraModules: preload, runtimeLoraUpdating: true, loraLoadMs: 300 }, i));
  }
  return { kind: 'sim', urls: sims.map((s) => s.url), base: 'base-m', adapters, requestTimeoutMs: 30_000, stop: async () => { await Promise.all(sims.map((s) => s.close())); } };
}

async function listed(url: string): Promise<Set<string>> {
  const j = (await (await call(`${url}/v1/models`)).json()) as { data: { id: string; parent?: string | null }[] };
  return new Set(j.data.filter((m) => m.parent).map((m) => m.id));
}

const post = async (url: string, path: string, body: unknown) => {
  const r = await call(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
};

/**
 * Every replica with `keep` loaded and nothing else of the fleet's adapters (an operator's own
 * calls, the gateway is not involved), then one request of each kept adapter on each: vLLM
 * reports its slots (vllm:lora_requests_info) only once a LoRA request has run.
 */
async function settle(f: AdapterFleet, keep: readonly string[]): Promise<void> {
  for (const url of f.urls) {
    const has = await listed(url);
    for (const a of Object.keys(f.adapters)) {
      if (has.has(a) && !keep.includes(a)) await post(url, '/v1/unload_lora_adapter', { lora_name: a });
      if (!has.has(a) && keep.includes(a)) {
        const r = await post(url, '/v1/load_lora_adapter', { lora_name: a, lora_path: f.adapters[a] });
        if (r.status !== 200) throw new Error(`${url} would not load ${a}: ${r.status} ${r.text.slice(0, 200)}`);
      }
    }
    for (const a of keep) await post(url, '/v1/completions', { model: a, prompt: 'hello', max_tokens: 1 });
  }
}

export interface TurnRecord { strategy: FleetStrategy; round?: number; session: number; turn: number; adapter: string; ttftMs: number | null; ok: boolean; error: string | null; replica: string | null; route: string | null }

export interface FleetWorkloadOptions {
  sessionsPerAgent: number; turns: number; maxTokens: number; systemTokens: [number, number]; seed: number;
  /** How often the gateways scrape each replica's /metrics (its slots), ms; the gateway's default when absent. */
  statsMs?: number;
}

/**
 * The gateways' scrape of each replica's /metrics (its slots) is the gateway's own default unless
 * `--stats-ms` is given: on the CPU fleet a scrape every 200 ms is work on the replicas' own cores,
 * and it made warmroute's warm turns 1.2–1.9× slower than a gateway-less split placing exactly the
 * same way (docs/benchmarks/adapters.md).
 */
const health = (o: FleetWorkloadOptions) => (o.statsMs === undefined ? {} : { health: { statsIntervalMs: o.statsMs } });

/**
 * Each strategy's run: the same sessions (agent k of adapter k mod 4, its system prompt; the
 * callers' words, think times and starts of bench/voice's workload), each strategy with prompts of
 * its own so that none starts warm from the one before. Bounded: every request has a timeout, and
 * every session ends after its turns.
 */
async function runStrategy(f: AdapterFleet, strategy: FleetStrategy, o: FleetWorkloadOptions, tag: string): Promise<TurnRecord[]> {
  const agents = FLEET_BENCH.adapters * FLEET_BENCH.agentsPerAdapter;
  const w = buildWorkload({ ...WORKLOAD_DEFAULTS, sessions: agents * o.sessionsPerAgent, turns: o.turns, groups: agents, systemTokens: o.systemTokens, toolTurnShare: 0, keylessShare: 0, thinkMs: [500, 1500], startSpreadMs: 3_000, seed: o.seed });
  // `grouped` is no router: each adapter's sessions go straight to the replica a fixed split gives
  // it, as many adapters on each replica as it has slots, so none ever waits for one. What is left
  // against `one-adapter` is what serving several adapters in one batch costs the engine itself.
  // `grouped-gateway`: the same split with a gateway in the path, one per replica (each with that
  // replica alone): what separates warmroute from `grouped` is then placement, not the extra hop
  // and the gateway's share of the cores.
  // `two-gateways`: warmroute as several pods run it, on one redis-server, each session's turns
  // alternating between the two, so that every placement a gateway makes is read by the other.
  const byHand = strategy === 'grouped' || strategy === 'grouped-gateway';
  const pods = strategy === 'two-gateways';
  const redis: RedisChild | null = pods ? await startRedis() : null;
  const own: Gateway[] = [];
  let g: Gateway | null = null;
  try {
    if (!byHand && !pods) g = await startGateway(f.urls, strategy === 'one-adapter' ? 'affinity' : strategy, [], null, health(o));
    if (strategy === 'grouped-gateway') for (const u of f.urls) own.push(await startGateway([u], 'affinity', [], null, health(o)));
    if (pods) for (let i = 0; i < 2; i++) own.push(await startGateway(f.urls, 'affinity', ['--redis', redis!.url], null, health(o)));
  } catch (e) {
    for (const x of own) await x.stop();
    await redis?.kill();
    throw e;
  }
  const groupedAt = (a: number) => Math.floor((a * f.urls.length) / FLEET_BENCH.adapters);
  const agent = keepAliveAgent();
  const records: TurnRecord[] = [];
  try {
    await Promise.all(w.sessions.map(async (plan) => {
      const adapter = strategy === 'one-adapter' ? 'lora-0' : `lora-${plan.group % FLEET_BENCH.adapters}`;
      const messages: { role: string; content: string }[] = [{ role: 'system', content: `${tag} ${w.groups[plan.group].system}` }];
      await sleep(plan.startMs);
      for (let turn = 0; turn < plan.turns.length; turn++) {
        messages.push({ role: 'user', content: plan.turns[turn].user });
        const body = { model: adapter, messages, max_tokens: o.maxTokens, ignore_eos: true, temperature: 0, stream: true, stream_options: { include_usage: true } };
        const direct = g === null ? (pods ? (plan.index + turn) % own.length : groupedAt(plan.group % FLEET_BENCH.adapters)) : -1;
        const url = g !== null ? g.url : own.length > 0 ? own[direct].url : f.urls[direct];
        const x: Exchange = await streamChatExchange(url, { 'x-session-id': `${tag}-${plan.id}` }, body, agent, f.requestTimeoutMs);
        const ok = x.status === 200 && x.error === null && x.ttftMs !== null;
        records.push({ strategy, session: plan.index, turn, adapter, ttftMs: x.ttftMs, ok, error: ok ? null : (x.error ?? (x.status === 200 ? 'answered 200 with no text: no first token to time' : `status ${x.status}`)), replica: g === null && !pods ? `replica-${direct}` : x.replica, route: x.route });
        messages.push({ role: 'assistant', content: x.content || '…' });
        await sleep(plan.turns[turn].thinkMs);
      }
    }));
  } finally {
    agent.destroy();
    await g?.stop();
    for (const x of own) await x.stop();
    await redis?.kill();
  }
  return records;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface StrategyRow { strategy: FleetStrategy; requests: number; errors: number; warm: { n: number; p50: number; p90: number }; p50Ratio: number; p90Ratio: number; adaptersPerReplica: Record<string, string[]> }

/** warmroute's warm-turn p50 and p90 over the one-adapter arm's, per round (rounds with both). */
export function roundRatios(records: readonly TurnRecord[]): { round: number; p50: number; p90: number }[] {
  const rounds = [...new Set(records.map((r) => r.round ?? 0))].sort((a, b) => a - b);
  const out: { round: number; p50: number; p90: number }[] = [];
  for (const round of rounds) {
    const rows = summarize(records.filter((r) => (r.round ?? 0) === round));
    const w = rows.find((x) => x.strategy === 'affinity');
    if (w && Number.isFinite(w.p50Ratio)) out.push({ round, p50: w.p50Ratio, p90: w.p90Ratio });
  }
  return out;
}

export function summarize(records: readonly TurnRecord[]): StrategyRow[] {
  const by = new Map<FleetStrategy, TurnRecord[]>();
  for (const r of records) by.set(r.strategy, [...(by.get(r.strategy) ?? []), r]);
  const rows = [...by].map(([strategy, rs]) => {
    const warm = percentiles(rs.filter((r) => r.turn >= 1 && r.ok).map((r) => r.ttftMs!));
    const mix: Record<string, string[]> = {};
    for (const r of rs) if (r.replica) mix[r.replica] = [...new Set([...(mix[r.replica] ?? []), r.adapter])].sort();
    return { strategy, requests: rs.length, errors: rs.filter((r) => !r.ok).length, warm: { n: warm.n, p50: warm.p50, p90: warm.p90 }, p50Ratio: NaN, p90Ratio: NaN, adaptersPerReplica: mix };
  });
  const base = rows.find((r) => r.strategy === 'one-adapter');
  for (const r of rows) {
    r.p50Ratio = base ? r.warm.p50 / base.warm.p50 : NaN;
    r.p90Ratio = base ? r.warm.p90 / base.warm.p90 : NaN;
  }
  return rows;
}

export interface OnDemandResult {
  /** The first request of an adapter loaded nowhere: its TTFT, the next request's, and the load the gateway made. */
  first: { adapter: string; ttftMs: number | null; nextTtftMs: number | null; loadMs: number; loads: number; ok: boolean };
  /** Concurrent first requests of another adapter: each one's TTFT, and how many loads they caused. */
  concurrent: { adapter: string; requests: number; ttftMs: (number | null)[]; loads: number; errors: number; replicas: string[] };
  /** A rotation of every adapter over the fleet, a few at a time. */
  rotation: { adapters: number; requests: number; errors: number; loads: number; unloads: number; maxLoadedPerReplica: number; errorsSeen: string[] };
}

async function loadCounters(adminUrl: string) {
  const text = await (await call(`${adminUrl}/metrics`)).text();
  return {
    loads: sumBy(text, 'warmroute_adapter_loads_total', 'outcome').loaded ?? 0,
    unloads: sumBy(text, 'warmroute_adapter_unloads_total', 'outcome').unloaded ?? 0,
    loadSeconds: sumSamples(text, 'warmroute_adapter_load_duration_seconds_sum'),
  };
}

/**
 * On demand, through warmroute with every adapter among adapters.sources and
 * maxLoadedPerReplica 3, from replicas that hold the first four only.
 */
async function runOnDemand(f: AdapterFleet, o: FleetWorkloadOptions, tag: string): Promise<OnDemandResult> {
  await settle(f, adapterNames(FLEET_BENCH.adapters));
  const g = await startGateway(f.urls, 'affinity', [], null, {
    ...health(o),
    adapters: { sources: f.adapters, maxLoadedPerReplica: FLEET_BENCH.maxLoadedPerReplica, loadTimeoutMs: f.requestTimeoutMs },
  });
  const agent = keepAliveAgent();
  const ask = (adapter: string, session: string) => streamChatExchange(g.url, { 'x-session-id': `${tag}-${session}` }, {
    model: adapter, messages: [{ role: 'system', content: `${tag} on-demand agent of ${adapter}` }, { role: 'user', content: `hello from ${session}` }], max_tokens: o.maxTokens, ignore_eos: true, stream: true,
  }, agent, f.requestTimeoutMs);
  const good = (x: Exchange) => x.status === 200 && x.error === null && x.ttftMs !== null;
  try {
    const names = adapterNames(FLEET_BENCH.rotation);
    const [firstAdapter, concurrentAdapter] = [names[FLEET_BENCH.adapters], names[FLEET_BENCH.adapters + 1]];
    let c0 = await loadCounters(g.adminUrl);
    const x1 = await ask(firstAdapter, 'first-1');
    const x2 = await ask(firstAdapter, 'first-2');
    let c1 = await loadCounters(g.adminUrl);
    const first = { adapter: firstAdapter, ttftMs: x1.ttftMs, nextTtftMs: x2.ttftMs, loadMs: (c1.loadSeconds - c0.loadSeconds) * 1000, loads: c1.loads - c0.loads, ok: good(x1) && good(x2) };

    c0 = c1;
    const xs = await Promise.all(Array.from({ length: 6 }, (_, i) => ask(concurrentAdapter, `concurrent-${i}`)));
    c1 = await loadCounters(g.adminUrl);
    const concurrent = { adapter: concurrentAdapter, requests: xs.length, ttftMs: xs.map((x) => x.ttftMs), loads: c1.loads - c0.loads, errors: xs.filter((x) => !good(x)).length, replicas: xs.map((x) => `${x.replica} ${x.route}`) };

    c0 = c1;
    // Two rounds over all twelve, two requests at a time: each replica holds three, so most
    // requests need a load and every load past the third an unload.
    const order = [...names, ...names];
    const errorsSeen: string[] = [];
    let errors = 0;
    let maxLoaded = 0;
    for (let i = 0; i < order.length; i += 2) {
      const pair = order.slice(i, i + 2);
      const got = await Promise.all(pair.map((a, k) => ask(a, `rotation-${i + k}`)));
      for (const x of got) {
        if (good(x)) continue;
        errors++;
        if (errorsSeen.length < 5) errorsSeen.push(x.error ?? `status ${x.status}`);
      }
      for (const url of f.urls) maxLoaded = Math.max(maxLoaded, [...(await listed(url))].filter((a) => a in f.adapters).length);
    }
    c1 = await loadCounters(g.adminUrl);
    const rotation = { adapters: names.length, requests: order.length, errors, loads: c1.loads - c0.loads, unloads: c1.unloads - c0.unloads, maxLoadedPerReplica: maxLoaded, errorsSeen };
    return { first, concurrent, rotation };
  } finally {
    agent.destroy();
    await g.stop();
  }
}

export interface FleetBenchResult { fleet: 'sim' | 'vllm'; at: string; options: FleetWorkloadOptions; rounds: number; rows: StrategyRow[]; onDemand: OnDemandResult | null; records: TurnRecord[] }

/** The whole benchmark on a fleet: the strategies in turn, `rounds` times in alternating order, then on demand. */
export async function runFleetBench(f: AdapterFleet, o: FleetWorkloadOptions, strategies: readonly FleetStrategy[], onDemand: boolean, rounds = 1): Promise<FleetBenchResult> {
  const run = Date.now().toString(36);
  const records: TurnRecord[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? strategies : [...strategies].reverse();
    for (const strategy of order) {
      // Every arm from the same state: the four adapters on every replica, nothing else.
      await settle(f, adapterNames(FLEET_BENCH.adapters));
      const tag = rounds === 1 ? `${run}-${strategy}` : `${run}-r${round}-${strategy}`;
      for (const r of await runStrategy(f, strategy, o, tag)) records.push(rounds === 1 ? r : { ...r, round });
    }
  }
  return { fleet: f.kind, at: new Date().toISOString(), options: o, rounds, rows: summarize(records), onDemand: onDemand ? await runOnDemand(f, o, `${run}-on-demand`) : null, records };
}

export function report(r: FleetBenchResult): string {
  const ms = (v: number | null) => (v === null || !Number.isFinite(v) ? '—' : `${v.toFixed(0)} ms`);
  const lines = [
    `${r.fleet === 'vllm' ? 'real vLLM (CPU)' : 'simulated'} fleet: ${FLEET_BENCH.replicas} replicas, --max-loras ${FLEET_BENCH.maxLoras}, ${FLEET_BENCH.adapters} adapters × ${FLEET_BENCH.agentsPerAdapter} agents, ${r.options.sessionsPerAgent} session(s) per agent × ${r.options.turns} turns, ${r.options.maxTokens} tokens a reply`,
    '',
    '| strategy | warm turns | TTFT p50 | TTFT p90 | p50 / one adapter | p90 / one adapter | errors | adapters per replica |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    ...r.rows.map((x) => `| ${LABEL[x.strategy]} | ${x.warm.n} | ${ms(x.warm.p50)} | ${ms(x.warm.p90)} | ${fmt(x.p50Ratio)}× | ${fmt(x.p90Ratio)}× | ${x.errors} / ${x.requests} | ${Object.values(x.adaptersPerReplica).map((a) => a.length).join(' ')} |`),
  ];
  if (r.rounds > 1) {
    const per = roundRatios(r.records);
    lines.push('', `${r.rounds} rounds, pooled above; warmroute ÷ one adapter per round: p50 ${per.map((x) => `${fmt(x.p50)}×`).join(', ')}; p90 ${per.map((x) => `${fmt(x.p90)}×`).join(', ')}`);
  }
  // What failed, in the failing requests' own words (the first few of each arm).
  for (const x of r.rows) {
    if (x.errors === 0) continue;
    const seen = [...new Set(r.records.filter((t) => t.strategy === x.strategy && !t.ok).map((t) => t.error ?? 'no first token'))].slice(0, 3);
    lines.push(`- ${LABEL[x.strategy]}: ${x.errors} failed (${seen.join('; ')})`);
  }
  const d = r.onDemand;
  if (d) {
    lines.push('', `On demand (adapters.sources, maxLoadedPerReplica ${FLEET_BENCH.maxLoadedPerReplica}):`,
      `- first request of ${d.first.adapter}, loaded nowhere: TTFT ${ms(d.first.ttftMs)} (the next request ${ms(d.first.nextTtftMs)}); ${d.first.loads} load of ${ms(d.first.loadMs)}${d.first.ok ? '' : ' — FAILED'}`,
      `- ${d.concurrent.requests} concurrent first requests of ${d.concurrent.adapter} (new sessions): ${d.concurrent.loads} load(s), on the ${new Set(d.concurrent.replicas.map((x) => x.split(' ')[0])).size} replica(s) they were placed on; TTFT ${d.concurrent.ttftMs.map(ms).join(', ')}; ${d.concurrent.errors} errors`,
      `- rotation of ${d.rotation.adapters} adapters, ${d.rotation.requests} requests: ${d.rotation.errors} errors, ${d.rotation.loads} loads, ${d.rotation.unloads} unloads, at most ${d.rotation.maxLoadedPerReplica} adapters loaded on a replica${d.rotation.errorsSeen.length ? ` (${d.rotation.errorsSeen.join('; ')})` : ''}`);
  }
  return lines.join('\n');
}

export async function main(argv: string[]): Promise<void> {
  const s = { type: 'string' } as const;
  const { values: a } = parseArgs({ args: argv, options: { fleet: s, real: { type: 'boolean' }, 'stats-ms': s, 'sessions-per-agent': s, turns: s, 'max-tokens': s, 'system-tokens': s, seed: s, strategies: s, rounds: s, 'no-on-demand': { type: 'boolean' } } });
  const kind = a.real ? 'vllm' : (a.fleet ?? 'sim');
  if (kind !== 'sim' && kind !== 'vllm') throw new Error(`--fleet sim|vllm (got ${kind})`);
  const [lo, hi] = (a['system-tokens'] ?? '300,500').split(',').map(Number);
  const o: FleetWorkloadOptions = { sessionsPerAgent: Number(a['sessions-per-agent'] ?? 1), turns: Number(a.turns ?? 6), maxTokens: Number(a['max-tokens'] ?? 16), systemTokens: [lo, hi ?? lo], seed: Number(a.seed ?? 1), ...(a['stats-ms'] === undefined ? {} : { statsMs: Number(a['stats-ms']) }) };
  const strategies = (a.strategies ?? DEFAULT_STRATEGIES.join(',')).split(',') as FleetStrategy[];
  for (const st of strategies) if (!STRATEGIES.includes(st)) throw new Error(`unknown strategy ${st}: ${STRATEGIES.join(', ')}`);
  const f = kind === 'vllm' ? await vllmFleet() : await simFleet();
  try {
    const r = await runFleetBench(f, o, strategies, !a['no-on-demand'], Number(a.rounds ?? 1));
    console.log(report(r));
    mkdirSync('bench/out', { recursive: true });
    writeFileSync(`bench/out/adapters-fleet-${kind}.json`, JSON.stringify(r, null, 2));
  } finally {
    await f.stop();
  }
}
