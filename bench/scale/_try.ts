import { startSimFleet } from '../voice/fleet.js';
import { runSocketRow } from './socket.js';
import { LIGHT_OUTPUT_TOKENS, SCALE_KV_BLOCKS } from './workload.js';
const R = Number(process.argv[2] ?? 16), G = Number(process.argv[3] ?? 1), S = Number(process.argv[4] ?? 200), ev = process.argv[5] === 'ev';
const fleet = await startSimFleet(R, LIGHT_OUTPUT_TOKENS, SCALE_KV_BLOCKS, ev);
try {
  const r = await runSocketRow({ fleet, strategy: G === 0 ? 'oracle' : 'affinity', pods: Math.max(G, 1), kvEvents: ev, workload: { sessions: S, turns: 4, startsPerSecond: 40, seed: 21 }, maxDurationS: 60, requestTimeoutS: 20, idleS: 3 }, (l) => process.stderr.write(l + '\r'));
  console.log(JSON.stringify(r.row, null, 1));
} finally { await fleet.stop(); }
