// The scale report's tables in markdown: socket rows, discrete-event rows, the validation, the
// faults, and the fleet-size goals (CPU per request from 4 to 256 replicas, RSS per pod at 256).

import type { ScaleResult } from './bench.js';
import type { ScaleRow, SocketFigures } from './rows.js';
import { HIT_RATE_TOLERANCE, TTFT_TOLERANCE } from './validate.js';

const f = (v: number | null | undefined, d = 0) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));
const pct = (v: number) => (Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : '–');
const ratio = (v: number | null) => (v === null ? '–' : `${v.toFixed(2)}×`);
/** A row stopped by its time cap before every session's last turn. */
const cut = (r: ScaleRow) => (r.truncated ? ' (cut short)' : '');
const who = (r: ScaleRow) => (r.strategy === 'oracle' ? 'oracle' : r.strategy === 'round-robin' ? 'round-robin' : `${r.pods} pod${r.pods > 1 ? 's' : ''}`);

export function socketTable(rows: readonly ScaleRow[]): string {
  const head = '| R | routing | S | KV events | requests (failed) | hit rate | of ideal | TTFT p50 / p90 ms | p90 vs 1 pod | p90 vs oracle | CPU ms/req | idle CPU ms/s per pod | RSS MB per pod | Redis cmd/req | Redis MB | KV events/s per pod | KV-event CPU ms/s per pod |\n|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = rows.filter((r) => r.kind === 'socket').map((r) => {
    const s = r.socket;
    return `| ${r.replicas} | ${who(r)} | ${r.sessions} | ${r.kvEvents && r.strategy !== 'oracle' ? 'on' : r.strategy === 'oracle' ? '–' : 'off'} | ${r.requests}${cut(r)} (${r.errors}) | ${pct(r.hitRate)} | ${pct(r.hitRate / r.idealHitRate)} | ${f(r.ttftP50Ms)} / ${f(r.ttftP90Ms)} | ${ratio(r.p90VsOnePod)} | ${ratio(r.p90VsOracle)} | ${f(s?.cpuMsPerRequest, 2)} | ${f(s?.idleCpuMsPerSecond, 1)} | ${f(s?.rssMbPerPod)} | ${f(s?.redisCommandsPerRequest, 2)} | ${f(s?.redisMemoryMb, 1)} | ${f(s?.kvEventsPerSecond)} | ${f(s?.kvEventCpuMsPerSecond, 1)} |`;
  });
  const failures = rows.filter((r) => r.kind === 'socket' && r.errors > 0).map((r) =>
    `- R=${r.replicas} ${who(r)} S=${r.sessions}: ${r.errors} failed (${Object.entries(r.errorKinds ?? {}).map(([k, n]) => `${n}× ${k}`).join('; ')})`);
  return [head, ...lines, ...(failures.length > 0 ? ['', 'Failed requests:', ...failures] : [])].join('\n');
}

export function desTable(rows: readonly ScaleRow[]): string {
  const head = '| R | routing | S | requests | hit rate | of ideal | TTFT p50 / p90 ms | p90 vs 1 pod | p90 vs oracle | router CPU ms/req | router CPU ms/req, replayed | virtual s | wall s |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = rows.filter((r) => r.kind === 'des').map((r) =>
    `| ${r.replicas} | ${who(r)} | ${r.sessions} | ${r.requests}${cut(r)} | ${pct(r.hitRate)} | ${pct(r.hitRate / r.idealHitRate)} | ${f(r.ttftP50Ms)} / ${f(r.ttftP90Ms)} | ${ratio(r.p90VsOnePod)} | ${ratio(r.p90VsOracle)} | ${f(r.routerCpuMsPerRequest, 3)} | ${f(r.routerReplayCpuMsPerRequest, 3)} | ${f(r.durationS)} | ${f(r.wallS, 1)} |`);
  return [head, ...lines].join('\n');
}

export function validationLine(r: ScaleResult): string {
  const v = r.validation;
  if (v === null) return 'Validation: not run (the socket or the discrete-event row of the shared size is missing).';
  const ok = (b: boolean) => (b ? 'within' : 'OUTSIDE');
  return `Validation at R=${v.replicas}, S=${v.sessions}, one pod (socket → discrete-event): hit rate ${pct(v.hitRate.socket)} → ${pct(v.hitRate.des)} (${ok(v.hitRate.ok)} ±${HIT_RATE_TOLERANCE * 100} points); TTFT p50 ${f(v.ttftP50Ms.socket)} → ${f(v.ttftP50Ms.des)} ms (${ok(v.ttftP50Ms.ok)}), p90 ${f(v.ttftP90Ms.socket)} → ${f(v.ttftP90Ms.des)} ms (${ok(v.ttftP90Ms.ok)}; TTFT band ±${TTFT_TOLERANCE.share * 100}% or ${TTFT_TOLERANCE.ms} ms).`;
}

export function faultTable(r: ScaleResult): string {
  if (r.faults.length === 0) return 'Faults: not run.';
  const head = '| fault | R | pods | S | requests | at s | failed | in flight at the fault | failed outside it | moves before / after | placement agrees again after | hit rate | TTFT p90 ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = r.faults.map((x) => `| ${x.fault} | ${x.replicas} | ${x.pods} | ${x.sessions} | ${x.requests} | ${f(x.atMs / 1000, 1)} | ${x.failed} | ${x.inFlightAtFault} | ${x.failedOutsideFault} | ${x.movesBefore} / ${x.movesAfter} | ${x.movesAfter === 0 ? 'no move' : `${f(x.agreeAfterMs / 1000, 1)} s`} | ${pct(x.hitRate)} | ${f(x.ttftP90Ms)} |`);
  return [head, ...lines].join('\n');
}

export interface FleetGoal {
  name: string;
  value: string;
  met: boolean | null;
}

/** Goal 3: CPU per request from the smallest to the largest fleet ≤ 1.2×; RSS per pod at the largest ≤ 512 MB. */
export function fleetGoals(r: ScaleResult): FleetGoal[] {
  const one = r.rows.filter((x) => x.kind === 'socket' && x.strategy === 'affinity' && x.pods === 1 && x.kvEvents && x.sessions === Math.min(...r.rows.filter((y) => y.kind === 'socket').map((y) => y.sessions)));
  const small = one.reduce<ScaleRow | null>((a, x) => (a === null || x.replicas < a.replicas ? x : a), null);
  const large = one.reduce<ScaleRow | null>((a, x) => (a === null || x.replicas > a.replicas ? x : a), null);
  if (!small?.socket || !large?.socket || small === large) return [{ name: 'CPU per request across fleet sizes', value: 'needs two fleet sizes', met: null }];
  const cpu = large.socket.cpuMsPerRequest / small.socket.cpuMsPerRequest;
  // A row whose requests failed spent its CPU on something else than serving them: not judged.
  // Nor one whose idle work, subtracted, leaves nothing: its idle window was not idle.
  const clean = [small, large].every((x) => x.errors <= 0.01 * x.requests && (x.socket as SocketFigures).cpuMsPerRequest > 0);
  return [
    { name: `CPU per request, R=${small.replicas} → R=${large.replicas} (one pod, KV events on, idle work apart) ≤ 1.2×`, value: `${f(small.socket.cpuMsPerRequest, 2)} → ${f(large.socket.cpuMsPerRequest, 2)} ms: ${cpu.toFixed(2)}×${clean ? '' : ' (failed requests or no CPU left once idle work is subtracted: not judged)'}`, met: clean ? cpu <= 1.2 : null },
    // Reported, not judged: a run this short tracks a few thousand engine blocks, far from the
    // default bounds, so its RSS says what a pod costs at this fleet size, not at its bound.
    { name: `RSS per pod at R=${large.replicas}, KV events on (goal at default bounds: ≤ 512 MB)`, value: `${f(large.socket.rssMbPerPod)} MB (peak ${f(large.socket.peakRssMbPerPod)} MB) with ${f(large.socket.kvBlocksTracked)} engine blocks tracked`, met: null },
    { name: `Idle CPU per pod, R=${small.replicas} → R=${large.replicas} (reported apart)`, value: `${f(small.socket.idleCpuMsPerSecond, 1)} → ${f(large.socket.idleCpuMsPerSecond, 1)} ms/s`, met: null },
  ];
}

export function markdownReport(r: ScaleResult): string {
  const goals = fleetGoals(r).map((g) => `- ${g.met === null ? 'REPORTED' : g.met ? 'MET' : 'NOT MET'}: ${g.name}: ${g.value}`);
  return [
    `# warmroute scale bench, ${r.when}`,
    '',
    `Machine: ${r.machine.cpus} × ${r.machine.cpu}, Node ${r.machine.node}; 1-minute load average during the run ${r.machine.loadAverage1m.map((x) => x.toFixed(1)).join(', ')}. Wall time ${f(r.wallS)} s.`,
    '',
    '## Socket runs (real gateway processes, one redis-server, the light simulator; wall time)',
    '',
    socketTable(r.rows),
    '',
    '## Discrete-event runs (the router\'s code in virtual time; no sockets)',
    '',
    desTable(r.rows),
    '',
    validationLine(r),
    '',
    '## Faults',
    '',
    faultTable(r),
    '',
    '## Fleet-size goals',
    '',
    ...goals,
    ...(r.skipped.length > 0 ? ['', `Skipped (time budget): ${r.skipped.join('; ')}.`] : []),
    ...(r.failed.length > 0 ? ['', 'Failed steps:', ...r.failed.map((x) => `- ${x}`)] : []),
    '',
  ].join('\n');
}
