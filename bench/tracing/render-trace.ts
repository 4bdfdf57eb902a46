// docs/trace.png: one real trace drawn as a waterfall. The trace is Jaeger's query API JSON
// ({"data": [trace]}) that `test/real/tracing.real.ts` writes to bench/out/trace-real.json (a Python
// OpenAI SDK client in a span of its own → warmroute → a vLLM CPU replica, in a Jaeger v2); it is
// kept beside the picture (docs/trace.json), and the page is screenshot by headless Chromium.
//
//   npx tsx bench/tracing/render-trace.ts --from bench/out/trace-real.json    # after the real run
//   npx tsx bench/tracing/render-trace.ts                                       # redraw docs/trace.json

import { copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { JaegerTrace } from '../../src/probe/jaeger.js';
import { screenshot } from '../lib/chromium.js';
import { esc } from '../report/svg.js';
import { ATTRIBUTE_CSS, attributeTables, attributeTablesHeight, waterfallSvg } from './waterfall.js';

const WIDTH = 1400;
const JSON_BESIDE = 'docs/trace.json';
const PNG = 'docs/trace.png';
const HTML = join('bench/out', 'trace.html');

function page(t: JaegerTrace, source: string): { html: string; height: number } {
  const w = waterfallSvg(t, WIDTH - 40);
  // In the order the call reached them (each service's first span start): Jaeger's processes map has none.
  const services = [...new Set([...t.spans].sort((a, b) => a.startTime - b.startTime).map((s) => t.processes[s.processID].serviceName))].join(' → ');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>warmroute: one call, end to end</title><style>
body{margin:20px;font-family:system-ui,sans-serif;color:#222;background:#fff}h1{font-size:20px;margin:0 0 4px}p{margin:0 0 12px;font-size:13px;color:#444}${ATTRIBUTE_CSS}</style></head><body>
<h1>One call, end to end: ${esc(services)}</h1>
<p>Trace ${esc(t.traceID)} as Jaeger's query API served it (${esc(source)}): a Python OpenAI SDK client in a span of its own sends a <code>traceparent</code>;
warmroute's SERVER span (its hops are span events; it is also the first upstream attempt, whose context went to the replica) is the parent of vLLM's own <code>llm_request</code>
(a real vLLM CPU replica, <code>--otlp-traces-endpoint</code>; its queue, prefill and decode are attributes). A failover or a resume would add a CLIENT span under the SERVER span.</p>
${w.svg}
<div style="margin-top:14px">${attributeTables(t)}</div>
</body></html>`;
  return { html, height: 130 + w.height + attributeTablesHeight(t) };
}

function main(): void {
  const { values } = parseArgs({ options: { from: { type: 'string', default: JSON_BESIDE }, png: { type: 'string', default: PNG }, 'no-png': { type: 'boolean' } }, strict: true });
  const from = values.from!;
  const doc = JSON.parse(readFileSync(from, 'utf8')) as { data?: JaegerTrace[] };
  const t = doc.data?.[0];
  if (!t || t.spans.length === 0) throw new Error(`${from}: no trace in it (Jaeger's {"data": [trace]} expected)`);
  if (resolve(from) !== resolve(JSON_BESIDE)) copyFileSync(from, JSON_BESIDE);
  mkdirSync('bench/out', { recursive: true });
  const { html, height } = page(t, JSON_BESIDE);
  writeFileSync(HTML, html);
  const lines = [`${t.spans.length} spans: ${t.spans.map((s) => s.operationName).join(', ')}`, `page: ${resolve(HTML)}`, `trace: ${resolve(JSON_BESIDE)}`];
  if (!values['no-png']) {
    screenshot(HTML, values.png!, WIDTH, height);
    lines.push(`png: ${resolve(values.png!)} (${WIDTH}×${height}, ${(statSync(values.png!).size / 1024).toFixed(0)} KB)`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

try {
  main();
} catch (e) {
  process.stderr.write(`render-trace: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
}
