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
  // A Responses API run keeps its own files: it does not replace the chat run's report.
  const name = (r.params.api ?? 'chat') === 'chat' ? 'voice' : `voice-${r.params.api}`;
  const paths = {
    json: join(dir, `${name}-${stamp}.json`),
    latestJson: join(dir, `${name}-latest.json`),
    html: join(dir, `${name}-latest.html`),
    md: join(dir, `${name}-latest.md`),
  };
  writeFileSync(paths.json, json);
  writeFileSync(paths.latestJson, json);
  writeFileSync(paths.html, buildHtml(r));
  writeFileSync(paths.md, markdownReport(r));
  return paths;
}
