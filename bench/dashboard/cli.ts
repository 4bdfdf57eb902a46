// npm run bench:dashboard — the Grafana dashboard (deploy/grafana/warmroute.json) drawn with no
// Grafana and no Prometheus: 4 simulated vLLM replicas and a gateway under a minute of voice
// traffic with some trouble in it, every /metrics scraped every 2 s into memory, the dashboard's
// own queries evaluated over those scrapes, the panels drawn as SVG in one HTML page
// (bench/out/dashboard.html) and that page photographed by headless Chromium (docs/dashboard.png).
//
//   npm run bench:dashboard                                  the whole run, ~75 s
//   npm run bench:dashboard -- --from bench/out/dashboard-scrapes.json   redraw a run's scrapes
//   npm run bench:dashboard -- --no-png                       the HTML only

import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startGateway, startSimFleet } from '../voice/fleet.js';
import { driveLoad, LOAD_S, TROUBLE, WORKLOAD, type LoadEvent } from './load.js';
import { buildPage, PAGE_WIDTH } from './page.js';
import { compileAll, DASHBOARD_FILE, evaluatePanel, loadDashboard, panelsOf } from './panels.js';
import { Tsdb, type Scrape } from './promql.js';
import { startScraper, target } from './scrape.js';
import { esc } from '../report/svg.js';
import { screenshot } from '../lib/chromium.js';

const OUT = 'bench/out';
const SCRAPES = join(OUT, 'dashboard-scrapes.json');
const HTML = join(OUT, 'dashboard.html');
const PNG = 'docs/dashboard.png';
const SCRAPE_EVERY_S = 2;
// Grafana's $__rate_interval with a 2 s scrape interval: four scrapes.
const RATE_INTERVAL_S = 4 * SCRAPE_EVERY_S;
const REPLICAS = 4;
const REPLICA_NAMES = Array.from({ length: REPLICAS }, (_, i) => `vllm-${i}`);

interface Recorded {
  kind: 'warmroute-dashboard-scrapes';
  when: string;
  /** Date.now() / 1000 when the load started; scrapes carry the same clock. */
  loadStartS: number;
  events: LoadEvent[];
  requests: { total: number; ok: number; routes: Record<string, number> };
  scrapes: Scrape[];
}

const log = (line: string) => process.stderr.write(`${line}\n`);

/** A fleet, a gateway, the scraper and the load; every process stopped whatever happens. */
async function record(): Promise<Recorded> {
  log(`starting ${REPLICAS} simulated vLLM replicas and a warmroute gateway`);
  const fleet = await startSimFleet(REPLICAS, [30, 90]);
  let gateway: Awaited<ReturnType<typeof startGateway>> | null = null;
  try {
    // Replicas named as a deployment names them, so legends read vllm-1, not a cut-off 127.0.0.1:3…
    gateway = await startGateway(fleet.urls, 'affinity', [], null, { upstreams: REPLICA_NAMES.map((name) => ({ name })) });
    const scraper = startScraper([target('warmroute', `${gateway.adminUrl}/metrics`), ...fleet.urls.map((u, i) => target('vllm', `${u}/metrics`, REPLICA_NAMES[i]))], SCRAPE_EVERY_S * 1000);
    let load: Awaited<ReturnType<typeof driveLoad>>;
    try {
      // A few idle scrapes first, so every counter has a value before the traffic moves it.
      await new Promise((r) => setTimeout(r, 2 * SCRAPE_EVERY_S * 1000));
      log(`load: ${WORKLOAD.sessions} voice sessions and 2 drifting ones for ${LOAD_S} s, with faults`);
      let lastLog = 0;
      load = await driveLoad(gateway.url, fleet.urls, REPLICA_NAMES, (line) => {
        if (Date.now() - lastLog > 10_000) { lastLog = Date.now(); log(`  ${line}`); }
      });
      // And a few after, so the last windows hold the end of the traffic.
      await new Promise((r) => setTimeout(r, 2 * SCRAPE_EVERY_S * 1000));
    } finally {
      await scraper.stop();
    }
    const died = gateway.died();
    if (died) throw new Error(`the gateway ${died}`);
    const routes: Record<string, number> = {};
    for (const r of load.run.records) if (r.route) routes[r.route] = (routes[r.route] ?? 0) + 1;
    return {
      kind: 'warmroute-dashboard-scrapes', when: new Date(load.startedAt).toISOString(), loadStartS: load.startedAt / 1000, events: load.events,
      requests: { total: load.run.records.length, ok: load.run.records.filter((r) => r.ok).length, routes },
      scrapes: scraper.scrapes,
    };
  } finally {
    await gateway?.stop();
    await fleet.stop();
  }
}

/** Every panel's queries over the scrapes, drawn; returns the page and its height. */
function draw(rec: Recorded): { html: string; height: number; empty: string[] } {
  const dashboard = loadDashboard();
  const queries = compileAll(dashboard, { rateIntervalS: RATE_INTERVAL_S });
  const db = new Tsdb(rec.scrapes);
  // Evaluate where Prometheus has data, at every scrape round, on the load's clock (the idle
  // scrapes before it only feed the first windows).
  const rounds = [...new Set(rec.scrapes.map((s) => s.t))].sort((a, b) => a - b).filter((t) => t >= rec.loadStartS);
  const panels = panelsOf(dashboard).map((p) => (p.type === 'row' ? { panel: p, lines: [], missing: [] } : evaluatePanel(p, queries, db, rounds)));
  const missing = [...new Set(panels.flatMap((p) => p.missing))].sort();
  const failed = rec.scrapes.filter((s) => !s.ok).length;
  const who = (label: string) => esc(rec.events.find((e) => e.label === label)?.replica ?? '?');
  const { html, height } = buildPage({
    title: `${dashboard.title} — rendered from the simulator, not a Grafana screenshot`,
    subtitle: `The dashboard's own PromQL (<code>${DASHBOARD_FILE}</code>) evaluated over ${rounds.length} scrapes, ${SCRAPE_EVERY_S} s apart, of a warmroute gateway and ${REPLICAS} simulated vLLM replicas ` +
      `(<code>npm run bench:dashboard</code>, ${rec.when.slice(0, 10)}; $job = All, $__rate_interval = ${RATE_INTERVAL_S} s). Load: ${WORKLOAD.sessions} voice sessions, ${WORKLOAD.keylessShare * 100}% keyless, and 2 that change their own prompt ` +
      `(the time in the system prompt from ${TROUBLE.clockDriftS[0]} to ${TROUBLE.clockDriftS[1]} s, tools reordered from ${TROUBLE.toolDriftFromS} s), ` +
      `${TROUBLE.batchWorkers} batch workers (<code>x-priority: batch</code>) from ${TROUBLE.batchS[0]} to ${TROUBLE.batchS[1]} s: ${rec.requests.total} requests.</p>` +
      `<p>Marks: <b>503</b>, <b>ok</b> ${who('503')} answers 503 (queue full), then serves again · <b>cut</b> ${who('cut')} drops streams after ${TROUBLE.cutAfterChunks} chunks · ` +
      `<b>crash</b>, <b>restart</b> ${who('crash')} is gone for ${TROUBLE.crashForS} s and comes back with an empty cache · <b>batch</b> the batch jobs start.`,
    panels,
    times: rounds.map((t) => t - rec.loadStartS),
    marks: rec.events.map((e) => ({ atS: e.atS, label: e.label })),
    footer: `No series (not exported by this build, or nothing happened): ${esc(missing.join(', ') || 'none')}. ${failed} failed scrapes (the crash). ` +
      'As in Prometheus, rate() misses what a label set already counts when it first appears: the first 503s and cut streams show less, or not at all, under retries.',
  });
  return { html, height, empty: missing };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { from: { type: 'string' }, 'no-png': { type: 'boolean' } }, strict: true });
  mkdirSync(OUT, { recursive: true });
  let rec: Recorded;
  if (values.from) {
    rec = JSON.parse(readFileSync(values.from, 'utf8')) as Recorded;
  } else {
    rec = await record();
    writeFileSync(SCRAPES, JSON.stringify(rec));
  }
  const { html, height, empty } = draw(rec);
  writeFileSync(HTML, html);
  const lines = [
    ...rec.events.map((e) => `${e.atS.toFixed(1).padStart(5)} s  ${e.label.padEnd(8)} ${e.detail}`),
    `${rec.requests.total} requests (${rec.requests.ok} ok; ${Object.entries(rec.requests.routes).map(([k, v]) => `${k} ${v}`).join(', ')}), ${rec.scrapes.length} scrapes`,
    `no series for: ${empty.join(', ') || 'none'}`,
    `page: ${resolve(HTML)}${values.from ? '' : ` (scrapes: ${SCRAPES}; redraw with --from)`}`,
  ];
  if (!values['no-png']) {
    screenshot(HTML, PNG, PAGE_WIDTH, height);
    lines.push(`png: ${resolve(PNG)} (${PAGE_WIDTH}×${height}, ${(statSync(PNG).size / 1024).toFixed(0)} KB)`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`\nbench:dashboard: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
