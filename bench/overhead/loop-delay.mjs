// Preloaded into a profiled gateway (node --import): SIGUSR2 opens a measured window (the event
// loop delay histogram reset, the time noted), a second SIGUSR2 closes it; the figures are written
// to WARMROUTE_LOOP_DELAY_FILE at exit. Plain JS: the gateway under test runs from dist/, without tsx.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const RESOLUTION_MS = 1;
const h = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
const marks = [];
// The main thread's own CPU time at each mark (user + system, /proc, in clock ticks of 10 ms): the
// profile's samples are scaled to it, as their gaps also hold the time the thread was not running.
const cpuMarks = [];
const TICK_US = 10_000;
function mainThreadCpuUs() {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_US;
  } catch {
    return null;
  }
}
// Every thread's CPU time at each mark, summed by thread name (V8's GC helpers, libuv's pool, the
// profiler's own thread): what the process spends off the main thread, which /proc's whole-process
// figure counts and the main thread's profile cannot.
function threadCpuUs() {
  const by = {};
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        const name = tid === String(process.pid) ? 'main' : readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        by[name] = (by[name] ?? 0) + (Number(f[11]) + Number(f[12])) * TICK_US;
      } catch { /* the thread ended between the listing and the read */ }
    }
  } catch {
    return null;
  }
  return by;
}
const threadMarks = [];
let figures = null;
// WARMROUTE_HEAP_PROFILE_FILE: V8's sampling heap profiler over the same window (what is allocated
// per request, by the function that allocated it), written there when the window closes.
// WARMROUTE_HEAP_SURVIVORS=1: only what outlived the young generation (collected by a major GC, or
// still alive at the end): what the scavenges copy and promote.
const heapFile = process.env.WARMROUTE_HEAP_PROFILE_FILE;
const inspector = heapFile ? new Session() : null;
inspector?.connect();
const HEAP_SAMPLING_BYTES = 4096;
process.on('SIGUSR2', () => {
  // µs on the monotonic clock the CPU profile's timestamps use.
  marks.push(Number(process.hrtime.bigint() / 1000n));
  cpuMarks.push(mainThreadCpuUs());
  threadMarks.push(threadCpuUs());
  if (marks.length === 1) {
    h.reset(); h.enable();
    inspector?.post('HeapProfiler.startSampling', { samplingInterval: HEAP_SAMPLING_BYTES, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: process.env.WARMROUTE_HEAP_SURVIVORS !== '1' });
    return;
  }
  h.disable();
  inspector?.post('HeapProfiler.stopSampling', (err, r) => { if (!err) writeFileSync(heapFile, JSON.stringify(r.profile)); });
  // The histogram holds the timer's whole interval: the delay is what exceeds the resolution.
  const delay = (ns) => Math.max(0, ns / 1e6 - RESOLUTION_MS);
  figures = { p50Ms: delay(h.percentile(50)), p99Ms: delay(h.percentile(99)), maxMs: delay(h.max), meanMs: delay(h.mean) };
});
process.on('exit', () => {
  if (process.env.WARMROUTE_LOOP_DELAY_FILE) writeFileSync(process.env.WARMROUTE_LOOP_DELAY_FILE, JSON.stringify({ marks, cpuMarks, threadMarks, loopDelay: figures }));
});
// A process without a SIGTERM handler of its own (the floor) dies on it without its profile: exit instead.
if (process.env.WARMROUTE_EXIT_ON_TERM === '1') process.once('SIGTERM', () => process.exit(0));
