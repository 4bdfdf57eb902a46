/**
 * npm run chaos [-- --short] [-- --only name,name] — the fault suite: each fault on loopback, its
 * requests tallied as completed, explicit errors (the client can act on them) or silent losses
 * (the client cannot tell). Prints the table, writes bench/out/chaos.{json,md}, and exits 1 when
 * any request was lost silently or a fault missed its expectation (EXPECT in chaos/scenarios.ts,
 * the same the short run in test/chaos/chaos.test.ts checks), naming each one that failed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { checkRow, isScenario, SCENARIOS, tableOf, type Row, type ScenarioName } from './chaos/scenarios.js';

const { values } = parseArgs({ options: { short: { type: 'boolean', default: false }, only: { type: 'string' } } });
const size = values.short ? 'short' : 'full';
const names = Object.keys(SCENARIOS) as ScenarioName[];
const only = values.only?.split(',').map((x) => x.trim()).filter(Boolean);
const unknown = only?.filter((x) => !isScenario(x)) ?? [];
if (unknown.length > 0) {
  process.stderr.write(`chaos: unknown scenario ${unknown.map((x) => JSON.stringify(x)).join(', ')}; the scenarios are ${names.join(', ')}\n`);
  process.exit(2);
}
const rows: Row[] = [];
const failed: string[] = [];
for (const name of names) {
  if (only && !only.includes(name)) continue;
  const row = await SCENARIOS[name](size);
  rows.push(row);
  process.stderr.write(`${row.fault}: ${row.completed} completed, ${row.explicit} explicit, ${row.silent} silent\n`);
  try {
    checkRow(name, row);
  } catch (e) {
    failed.push(`${name}: ${(e as Error).message.split('\n')[0]}`);
  }
}
const table = tableOf(rows);
const verdict = failed.length === 0 ? 'Every fault met its expectation, with no silent loss.' : `Failed:\n${failed.map((f) => `- ${f}`).join('\n')}`;
mkdirSync('bench/out', { recursive: true });
writeFileSync('bench/out/chaos.json', JSON.stringify({ when: new Date().toISOString(), size, rows, failed }, null, 1));
writeFileSync('bench/out/chaos.md', `# Fault suite (${new Date().toISOString()}, ${size})\n\n${table}\n\n${verdict}\n`);
process.stdout.write(`${table}\n\n${verdict}\n`);
process.exitCode = failed.length > 0 ? 1 : 0;
