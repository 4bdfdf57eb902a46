// Writing a run: JSON (every request's timings), the HTML report, the markdown tables.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildHtml } from '../report/html.js';
import type { BenchResult } from './bench.js';
import { markdownReport } from './markdown.js';

export function writeVoiceOutputs(r: BenchResult, dir: string): { json: string; latestJson: string; html: string; md: string } {
  mkdirSync(dir, { recursive: true });
  const stamp = r.when.replace(/[:.]/g, '-');
  const json = JSON.stringify(r);
  const paths = {
    json: join(dir, `voice-${stamp}.json`),
    latestJson: join(dir, 'voice-latest.json'),
    html: join(dir, 'voice-latest.html'),
    md: join(dir, 'voice-latest.md'),
  };
  writeFileSync(paths.json, json);
  writeFileSync(paths.latestJson, json);
  writeFileSync(paths.html, buildHtml(r));
  writeFileSync(paths.md, markdownReport(r));
  return paths;
}
