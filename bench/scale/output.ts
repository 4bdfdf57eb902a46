// Writing a scale run: the JSON, the HTML report and the markdown tables, dated and as latest.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ScaleResult } from './bench.js';
import { buildScaleHtml } from './html.js';
import { markdownReport } from './markdown.js';

export function writeScaleOutputs(r: ScaleResult, dir: string): { json: string; html: string; md: string } {
  mkdirSync(dir, { recursive: true });
  const stamp = r.when.replace(/[:.]/g, '-');
  const json = JSON.stringify(r, null, 1);
  writeFileSync(join(dir, `scale-${stamp}.json`), json);
  const paths = { json: join(dir, 'scale-latest.json'), html: join(dir, 'scale-latest.html'), md: join(dir, 'scale-latest.md') };
  writeFileSync(paths.json, json);
  writeFileSync(paths.html, buildScaleHtml(r));
  writeFileSync(paths.md, markdownReport(r));
  return paths;
}
