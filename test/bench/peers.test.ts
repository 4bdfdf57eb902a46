// bench:peers' own machinery, without any peer installed: a child started as a process group is
// stopped with every process it forked (a Python launcher's router, nginx's worker), and the
// markdown table lists each router's figures and leaves a peer that failed turns out of the ratio.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getPriority } from 'node:os';
import { effectiveNice, groupCpuSeconds, setGroupNice, startChild, startChildLines } from '../../bench/lib/procs.js';
import { p90Lead, peersTable } from '../../bench/peers/markdown.js';
import { roundOrder } from '../../bench/peers/bench.js';
import type { PeerSummary } from '../../bench/peers/bench.js';
import { waitFor } from '../helpers/wait.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('stop() of a process-group child ends the processes it forked too', async () => {
  // The shell forks a sleeper and prints its pid, then waits on it: the sleeper is the grandchild
  // a plain kill of the shell would leave running.
  const child = await startChildLines('sh', ['-c', 'sleep 300 & echo $!; wait'], /^\d+$/, 1, { group: true });
  const grandchild = Number(child.lines[0]);
  try {
    assert.ok(alive(grandchild), 'the forked sleeper runs');
    await child.stop();
    await waitFor('the forked sleeper to be gone', () => !alive(grandchild), 5_000);
  } finally {
    if (alive(grandchild)) process.kill(grandchild, 'SIGKILL');
  }
});

const summary = (strategy: string, p90: number, errors = 0): PeerSummary => ({
  strategy, label: strategy, requests: 10, errors, durationMs: 1, truncated: false,
  ttft: { n: 10, p50: p90 / 2, p90, p99: p90 * 2 }, budgetMs: 300, overBudget: 0, hitRate: 0.9, clientHitRate: 0.9, idealHitRate: null,
  load: { served: {}, maxOverAvg: null, sessions: {}, sessionsMaxOverAvg: null, peakInflight: {}, meanInflight: {}, meanInflightMaxOverAvg: null },
  keyed: { sessions: 1, requests: 5, ttft: { n: 5, p50: 1, p90: p90, p99: p90 }, hitRate: null, idealHitRate: null },
  keyless: { sessions: 1, requests: 5, ttft: { n: 5, p50: 1, p90: p90, p99: p90 }, hitRate: null, idealHitRate: null },
  overhead: { p50Ms: null, p99Ms: null, serverTimingP50Ms: null, serverTimingP99Ms: null }, hopsMeanMs: {}, perTurn: [], routes: {},
  added: { n: 5, directP50Ms: 10, viaP50Ms: 12.5, addedP50Ms: 2.5, failed: 0 }, salted: false, replicaShare: [0.5, 0.5],
  engine: { ttftMs: 120, queueMs: 4, prefillMs: null }, routerCpuMsPerRequest: 0.5, gatewayMeansMs: null,
});

test('the table lists every router; the p90 ratio skips round-robin and any peer that failed turns', () => {
  const rows = [summary('round-robin', 50), summary('sglang-cache-aware', 400), summary('nginx-hash', 20, 3), summary('warmroute', 200)];
  const table = peersTable(rows);
  for (const r of rows) assert.match(table, new RegExp(`\\| ${r.strategy} \\|`));
  assert.match(table, /\| nginx-hash \| 10 \| 20 \| 40 \| 20 \/ 20 \| 90\.0% \| 50% \/ 50% \| 3 \/ 10 \| 2\.5 \(10\.0\) \| 120 \/ 4 \/ – \| 0\.50 \|/);
  assert.deepEqual(p90Lead(rows), { peer: 'sglang-cache-aware', ratio: 2 });
});

test('rounds visit the routers in a rotated order, each once a round', () => {
  const names = ['a', 'b', 'c'];
  assert.deepEqual([0, 1, 2, 3].map((r) => roundOrder(names, r).join('')), ['abc', 'bca', 'cab', 'abc']);
});

test('a process group\'s CPU time: this process counts, a pid that is no process is null', () => {
  const mine = groupCpuSeconds(process.pid);
  if (mine === null) return; // no /proc here
  const start = process.cpuUsage();
  while (process.cpuUsage(start).user < 50_000) { /* 50 ms of CPU: five of /proc's ticks */ }
  assert.ok((groupCpuSeconds(process.pid) as number) > mine);
  assert.equal(groupCpuSeconds(2 ** 22 + 1), null);
});

test('a process group set to nice 3 runs at nice 3: its own priority and, with autogroups, its session\'s', async () => {
  const child = await startChild(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], null, { group: true });
  const pid = child.proc.pid as number;
  try {
    const set = setGroupNice(pid, 3);
    assert.ok(set.threads >= 1, 'no thread took the priority');
    assert.equal(getPriority(pid), 3);
    // With autogroups on, the scheduler reads the session's nice: only asserted where it could be set.
    if (set.session) assert.equal(effectiveNice(pid), 3);
  } finally {
    await child.stop();
  }
});
