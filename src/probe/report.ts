// Human table and machine JSON for a ProbeResult.

import type { EndpointRow, ProbeResult, RowResult } from './run.js';
import type { Summary } from './stats.js';
import { align } from './align.js';
import { traceLines } from './trace-report.js';

export function formatJson(result: ProbeResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}

const SEND_LABEL = { only: '', first: ' 1st (cold)', second: ' 2nd (warm)' } as const;

export function formatTable(result: ProbeResult): string {
  const compare = result.endpoints.length === 2;
  const lines: string[] = [];
  lines.push(
    `warmroute probe · model ${result.model} · ${result.trials} trial${result.trials === 1 ? '' : 's'} · max_tokens ${result.maxTokens}` +
      (result.scale !== 1 ? ` · prompt scale ${result.scale}` : ''),
  );
  for (const ep of result.endpoints) {
    const tcp = ep.tcpConnectMs ? `tcp connect median ${ms(ep.tcpConnectMs.median)} ms (p90 ${ms(ep.tcpConnectMs.p90)})` : 'tcp connect n/a';
    lines.push(`  ${ep.label}  ${ep.chatUrl}  ${tcp}  · ${ep.connections} connection${ep.connections === 1 ? '' : 's'}`);
  }
  lines.push('');
  lines.push('TTFT in ms: request sent → first SSE content chunk');

  const head = ['case', '~tokens', 'ep', 'ok', 'median', 'p90', 'min', 'max', 'prompt', 'cached'];
  if (compare) head.push('B/A', 'B−A ms');
  const table: string[][] = [head];
  for (const row of result.rows) {
    row.results.forEach((r, i) => {
      const cells = [
        i === 0 ? row.case + SEND_LABEL[row.send] : '',
        i === 0 ? String(row.approxPromptTokens) : '',
        r.endpoint,
        `${r.ok}/${r.ok + r.failed}`,
        ...summaryCells(r.ttftMs),
        count(r.promptTokens),
        count(r.cachedTokens),
      ];
      if (compare) cells.push(...compareCells(row, i));
      table.push(cells);
    });
  }
  lines.push(...align(table, new Set([0, 2])));
  lines.push('prompt / cached: medians of usage.prompt_tokens / usage.prompt_tokens_details.cached_tokens (- = not reported)');

  if (result.traces) lines.push(...traceLines(result.traces));

  const failures = failureLines(result);
  if (failures.length > 0) lines.push('', 'failures:', ...failures);
  for (const ep of result.endpoints) {
    if (ep.connections > 1) {
      lines.push(`note: ${ep.label} opened ${ep.connections} connections; a failure or timeout forced a reconnect, so a trial paid for a handshake`);
    }
  }
  if (!result.ok) lines.push('', 'some cases produced no successful trial');
  return `${lines.join('\n')}\n`;
}

function summaryCells(s: Summary | null): string[] {
  return s ? [ms(s.median), ms(s.p90), ms(s.min), ms(s.max)] : ['-', '-', '-', '-'];
}

function compareCells(row: RowResult, i: number): string[] {
  if (i !== 1 || !row.compare) return ['', ''];
  const { ratio, diffMs } = row.compare;
  return [ratio === null ? '-' : `${ratio.toFixed(2)}x`, diffMs === null ? '-' : `${diffMs >= 0 ? '+' : ''}${ms(diffMs)}`];
}

function failureLines(result: ProbeResult): string[] {
  const out: string[] = [];
  for (const row of result.rows) {
    for (const r of row.results) {
      if (r.failed === 0) continue;
      out.push(`  ${r.endpoint} ${row.case}${SEND_LABEL[row.send]}: ${r.failed} of ${r.ok + r.failed} failed`);
      for (const [msg, n] of countErrors(r)) out.push(`      ${n > 1 ? `${n}× ` : ''}${msg}`);
    }
  }
  return out;
}

function countErrors(r: EndpointRow): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of r.samples) if (s.error) m.set(s.error, (m.get(s.error) ?? 0) + 1);
  return m;
}

function ms(v: number): string {
  return v.toFixed(1);
}

function count(v: number | null): string {
  return v === null ? '-' : String(Math.round(v));
}
