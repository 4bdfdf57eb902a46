import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cutLine, demoTable, sameTurnsLine } from '../../bench/report/demo-text.js';
import { buildHtml } from '../../bench/report/html.js';
import { markdownReport, shortTable } from '../../bench/voice/markdown.js';
import { syntheticResult } from './fixtures.js';

const VOID = new Set(['meta', 'br', 'hr', 'img', 'input', 'link']);

/** Tag balance over HTML + inline SVG: every element closed in order, self-closing SVG shapes allowed. */
function assertBalanced(html: string): void {
  const stack: string[] = [];
  const body = html.replace(/^<!doctype html>/i, '').replace(/<style>[\s\S]*?<\/style>/, '<style></style>');
  for (const m of body.matchAll(/<(\/?)([a-zA-Z][\w-]*)([^>]*?)(\/?)>/g)) {
    const [, close, name, , self] = m;
    const tag = name.toLowerCase();
    if (self || (!close && VOID.has(tag))) continue;
    if (close) {
      const open = stack.pop();
      assert.equal(open, tag, `</${tag}> closes <${open}> at ${m.index}`);
    } else {
      stack.push(tag);
    }
  }
  assert.deepEqual(stack, [], 'unclosed elements');
  assert.doesNotMatch(body.replace(/<[^>]*>/g, ''), /[<>]/, 'stray angle bracket in text');
}

test('the HTML report is well-formed, self-contained and has every chart', () => {
  const html = buildHtml(syntheticResult());
  assertBalanced(html);
  assert.equal((html.match(/<svg xmlns/g) ?? []).length, 4, 'CDF, per turn, hops, gateway hops');
  for (const s of ['TTFT distribution', 'TTFT by turn', 'Per-hop breakdown', 'Goals', 'Run parameters', 'warmroute (affinity)', 'round-robin']) {
    assert.ok(html.includes(s), s);
  }
  // Nothing external: no scripts, stylesheets, images or fonts fetched.
  assert.doesNotMatch(html, /<script|<link|<img|@import|url\(/i);
  assert.deepEqual([...html.matchAll(/https?:\/\/[^"' ]+/g)].map((m) => m[0]).filter((u) => u !== 'http://www.w3.org/2000/svg'), []);
  // Text from the run is escaped.
  assert.ok(html.includes('test &lt;cpu&gt; &amp; &quot;quotes&quot;'));
  // Paths carry numbers only (no NaN from an empty or degenerate series).
  assert.doesNotMatch(html, /NaN|Infinity|undefined/);
  assert.match(html, /class="badge (met|not|na)"/);
});

test('markdown tables have one row per strategy and the goals', () => {
  const r = syntheticResult();
  const md = markdownReport(r);
  assert.equal((md.match(/^\| \*\*warmroute\*\* \(affinity\)/gm) ?? []).length, 2);
  assert.equal((md.match(/^\| round-robin/gm) ?? []).length, 2);
  assert.match(md, /not measured +warmroute TTFT p90 ≤ 1\.1× the oracle placement's: not measured \(needs affinity and oracle\)/);
  const short = shortTable(r.summaries).split('\n');
  assert.equal(short.length, 4);
  assert.ok(short.every((l) => l.split('|').length === short[0].split('|').length));
});

test('the oracle in the report: its own row, no gateway figures ("—"), not in the gateway-hops chart, the reference line', () => {
  const r = syntheticResult({ oracle: true });
  const md = markdownReport(r);
  assert.equal((md.match(/^\| oracle \(session i → replica i mod R, no gateway\)/gm) ?? []).length, 2);
  const row = md.split('\n').find((l) => l.startsWith('| oracle'))!;
  assert.ok(row.endsWith('| — |'), row); // gateway overhead: not applicable
  const keysRow = md.split('\n').filter((l) => l.startsWith('| oracle'))[1];
  assert.ok(keysRow.endsWith('| — |'), keysRow); // route reasons
  assert.match(md, /^(met|NOT met) +warmroute TTFT p90 ≤ 1\.1× the oracle placement's: \d+ ms vs \d+ ms = [\d.]+×$/m);
  assert.match(md, /^reference +round-robin TTFT p90 over warmroute's: \d+ ms vs \d+ ms = [\d.]+×$/m);
  assert.match(md, /^reference +round-robin TTFT p90 over the oracle placement's \(the most any placement gains here\): \d+ ms vs \d+ ms = [\d.]+×$/m);
  const short = shortTable(r.summaries).split('\n');
  assert.equal(short.length, 5);
  assert.ok(short.every((l) => l.split('|').length === short[0].split('|').length));

  const html = buildHtml(r);
  assertBalanced(html);
  assert.doesNotMatch(html, /NaN|Infinity|undefined/);
  assert.ok(html.includes('oracle (i mod R, no gateway)'));
  assert.match(html, /class="badge ref">reference</);
  // The oracle's rows are told apart by italics on a light background: the near-black of the
  // reference badge is for the badge alone (an unscoped .ref rule once painted the rows with it).
  assert.match(html, /<tr class="direct">/);
  assert.doesNotMatch(html, /(^|[}\s])\.ref\{/);
  assert.match(html, /tr\.direct td\{[^}]*color:#1d2327[^}]*background:#f6f6f3/);
  // The hop breakdown has the oracle (its whole TTFT is the replica's); the gateway's own hops do not.
  const svgs = html.split('<svg xmlns').slice(1);
  assert.equal(svgs.length, 4);
  assert.ok(svgs[2].includes('oracle (i mod R, no gateway)'));
  assert.ok(!svgs[3].includes('oracle (i mod R, no gateway)'));
  const oracle = r.summaries[2];
  assert.equal(oracle.overhead.p50Ms, null);
  const ttfts = r.records.filter((x) => x.strategy === 'oracle').map((x) => x.ttftMs!);
  assert.equal(oracle.hopsMeanMs.first_token, ttfts.reduce((a, b) => a + b, 0) / ttfts.length);
});

test('the summary says how many planned requests each strategy served, and why one served fewer', () => {
  const r = syntheticResult();
  const full = buildHtml(r);
  assert.match(full, /<td>12 \/ 12<\/td>/);
  assert.doesNotMatch(full, /Not every strategy served/);
  // Round-robin's every request is over the 300 ms budget: a share, with its counts.
  assert.match(full, /<td>100% \(12 of 12\)<\/td>/);
  // Round-robin cut before its last turn: 8 of 12 served; the like-for-like table has those 8.
  r.records = r.records.filter((x) => !(x.strategy === 'round-robin' && x.turn === 2));
  r.summaries[0] = { ...r.summaries[0], truncated: true, requests: 8 };
  const cut = buildHtml(r);
  assert.match(cut, /<td>8 \/ 12 \(cut at 60 s\)<\/td>/);
  assert.match(cut, /Not every strategy served every planned request/);
  assert.match(cut, /On the same 8 requests, those every strategy served/);
  const affinityRow = /<tr><td>warmroute \(affinity\)<\/td><td>(\d+)<\/td>/.exec(cut);
  assert.ok(affinityRow, 'a row for warmroute in the same-requests table');
  assertBalanced(cut);
});

test('TTFT by turn goes to a log axis where one strategy is 10× another', () => {
  const r = syntheticResult();
  const logAxes = (html: string) => (html.match(/client TTFT, ms \(log scale\)/g) ?? []).length;
  assert.equal(logAxes(buildHtml(r)), 1, 'the CDF only: 400 vs 60 ms is under 10×');
  r.summaries[1] = { ...r.summaries[1], perTurn: r.summaries[1].perTurn.map((t) => ({ ...t, p50: 10, p90: 12 })) };
  const html = buildHtml(r);
  assert.equal(logAxes(html), 2);
  assertBalanced(html);
  assert.doesNotMatch(html, /NaN|Infinity/);
});

test('the per-turn section appears only where turns have several calls', () => {
  const r = syntheticResult();
  const turn = (calls: number) => ({ strategy: 'affinity', session: 0, turn: 0, calls, overlapped: false, waitMs: 80, ok: true, adminKey: null, gatewayWaitMs: null, gatewayCalls: null });
  r.turns = [turn(1), turn(1)] as NonNullable<typeof r.turns>;
  assert.doesNotMatch(buildHtml(r), /Per turn, not just per request/);
  r.turns = [turn(1), turn(3)] as NonNullable<typeof r.turns>;
  assert.match(buildHtml(r), /Per turn, not just per request/);
});

test('the demo prints served / planned first, why a run was cut, and the strategies on the same requests', () => {
  const r = syntheticResult();
  const table = demoTable(r.summaries, 12, 60).split('\n');
  assert.match(table[0], /^\| strategy \| served \/ planned \| TTFT p50 ms/);
  assert.match(table[2], /^\| round-robin \| 12 \/ 12 \| \d+ /);
  assert.equal(cutLine(r.summaries, 60), '');
  assert.equal(sameTurnsLine(r), '');
  r.records = r.records.filter((x) => !(x.strategy === 'round-robin' && x.turn === 2));
  r.summaries[0] = { ...r.summaries[0], truncated: true, requests: 8 };
  assert.match(demoTable(r.summaries, 12, 60), /\| round-robin \| 8 \/ 12 \(cut at 60 s\) \|/);
  assert.match(cutLine(r.summaries, 60), /round-robin: cut at the 60 s cap .* missing from its figures/);
  assert.match(sameTurnsLine(r), /on the same 8 requests \(those every strategy served\): round-robin p50 \d+ \/ p90 \d+ ms; warmroute \(affinity\) p50/);
});
