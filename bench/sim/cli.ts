// `npm run sim -- --replicas 4 --base-port 8001`: start a simulated vLLM fleet, print one line
// per replica URL (replica i is named sim-i), run until SIGINT/SIGTERM.

import { parseArgs } from 'node:util';
import { startFleet } from './fleet.js';
import { KNOB_OPTIONS, knobHelp, knobsFromArgs } from './knob-args.js';

const USAGE = `usage: npm run sim -- [--replicas N] [--base-port P] [knobs...]

  --replicas N                  number of replicas (1)
  --base-port P                 first port; replica i listens on P+i (0 = free ports)
  --kv-events                   publish vLLM's KV events (zeromq PUB + replay ROUTER) from each block pool
  --kv-events-base-port P       replica i publishes on P+2i, replays on P+2i+1 (0 = free ports)
  --kv-events-shape map|array   batch encoding: 2026 tagged maps (default) or the older positional arrays
  --kv-events-pad N             each stored block is followed by N more the pool does not hold (a bench knob
                                that fills a gateway's kvEvents.maxBlocks budget; 0 = none)
  --otlp-traces-endpoint URL    vLLM's flag: an llm_request span per finished request, OTLP http/json to URL
${knobHelp()}

Admin per replica: POST /sim/fault {"kind":...}, DELETE /sim/fault, GET /sim/state, POST /sim/reset`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ...KNOB_OPTIONS,
      replicas: { type: 'string', default: '1' },
      'base-port': { type: 'string', default: '0' },
      'kv-events': { type: 'boolean' },
      'kv-events-base-port': { type: 'string', default: '0' },
      'kv-events-shape': { type: 'string', default: 'map' },
      'kv-events-pad': { type: 'string', default: '0' },
      'otlp-traces-endpoint': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const knobs = knobsFromArgs(values);
  const shape = values['kv-events-shape'];
  if (shape !== 'map' && shape !== 'array') throw new Error('--kv-events-shape is map or array');
  const padBlocks = Number(values['kv-events-pad']);
  if (!Number.isInteger(padBlocks) || padBlocks < 0) throw new Error('--kv-events-pad is a whole number ≥ 0');
  const kvEvents = values['kv-events'] ? { shape: shape as 'map' | 'array', padBlocks } : undefined;
  const fleet = await startFleet({ ...knobs, kvEvents, replicas: Number(values.replicas), basePort: Number(values['base-port']), kvEventsBasePort: Number(values['kv-events-base-port']), otlpTracesEndpoint: values['otlp-traces-endpoint'] as string | undefined });
  // stdout carries only the URLs, one per line, so scripts can read them; the rest goes to stderr.
  for (const r of fleet.replicas) console.log(r.url);
  for (const r of fleet.replicas) if (r.kvEvents) console.error(`sim: ${r.name} kv-events ${r.kvEvents.endpoint} replay ${r.kvEvents.replayEndpoint}`);
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
