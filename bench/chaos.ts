/**
 * npm run chaos [-- --short] [-- --only name,name] — the fault suite: each fault on loopback, its
 * requests tallied as completed, explicit errors (the client can act on them) or silent losses
 * (the client cannot tell). Prints the table, writes bench/out/chaos.{json,md}, and exits 1 when
 * any request was lost silently.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { SCENARIOS, tableOf, type Row } from './chaos/scenarios.js';

const { values } = parseArgs({ options: { short: { type: 'boolean', default: false }, only: { type: 'string' } } });
const size = values.short ? 'short' : 'full';
const rows: Row[] = [];
const only = values.only?.split(',');
for (const [name, run] of Object.entries(SCENARIOS)) {
  if (only && !only.includes(name)) continue;
  const row = await run(size);
  rows.push(row);
  process.stderr.write(`${row.fault}: ${row.completed} completed, ${row.explicit} explicit, ${row.silent} silent\n`);
}
const table = tableOf(rows);
mkdirSync('bench/out', { recursive: true });
writeFileSync('bench/out/chaos.json', JSON.stringify({ when: new Date().toISOString(), size, rows }, null, 1));
writeFileSync('bench/out/chaos.md', `# Fault suite (${new Date().toISOString()}, ${size})\n\n${table}\n`);
process.stdout.write(`${table}\n`);
process.exitCode = rows.some((r) => r.silent > 0) ? 1 : 0;
