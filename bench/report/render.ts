// Re-render a report from a saved run: npx tsx bench/report/render.ts bench/out/voice-latest.json [out.html]

import { readFileSync, writeFileSync } from 'node:fs';
import type { BenchResult } from '../voice/bench.js';
import { buildHtml } from './html.js';

const [input, output] = process.argv.slice(2);
if (!input) {
  process.stderr.write('usage: npx tsx bench/report/render.ts RESULT.json [OUT.html]\n');
  process.exit(2);
}
const result = JSON.parse(readFileSync(input, 'utf8')) as BenchResult;
const out = output ?? input.replace(/\.json$/, '.html');
writeFileSync(out, buildHtml(result));
process.stdout.write(`${out}\n`);
