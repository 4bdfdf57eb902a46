// `npm run sim -- --replicas 4 --base-port 8001`: start a simulated vLLM fleet, print one line
// per replica URL (replica i is named sim-i), run until SIGINT/SIGTERM.

import { parseArgs } from 'node:util';
import { startFleet } from './fleet.js';
import { KNOB_OPTIONS, knobHelp, knobsFromArgs } from './knob-args.js';

const USAGE = `usage: npm run sim -- [--replicas N] [--base-port P] [knobs...]

  --replicas N                  number of replicas (1)
  --base-port P                 first port; replica i listens on P+i (0 = free ports)
${knobHelp()}

Admin per replica: POST /sim/fault {"kind":...}, DELETE /sim/fault, GET /sim/state, POST /sim/reset`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ...KNOB_OPTIONS,
      replicas: { type: 'string', default: '1' },
      'base-port': { type: 'string', default: '0' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const knobs = knobsFromArgs(values);
  const fleet = await startFleet({ ...knobs, replicas: Number(values.replicas), basePort: Number(values['base-port']) });
  // stdout carries only the URLs, one per line, so scripts can read them; the rest goes to stderr.
  for (const r of fleet.replicas) console.log(r.url);
  console.error(`sim: ${fleet.replicas.length} replica(s) of ${fleet.replicas[0].config.model}; SIGINT/SIGTERM to stop`);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    fleet.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  console.error(USAGE);
  process.exit(2);
});
