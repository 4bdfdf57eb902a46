// A markdown pipe table (as markdown.ts writes them) as an HTML table, so the page and the
// markdown report show the same cells.

import { esc } from '../report/svg.js';

export function htmlTable(table: string): string {
  // Only the table: a note after it (a blank line, then text) stays out.
  const lines = table.trim().split('\n\n')[0].split('\n').filter((l, i) => i !== 1);
  const cells = (l: string) => l.replace(/^\|\s*|\s*\|$/g, '').split(/\s*\|\s*/);
  const [head, ...body] = lines;
  return `<table><tr>${cells(head).map((c) => `<th>${esc(c)}</th>`).join('')}</tr>${body.map((l) => `<tr>${cells(l).map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('')}</table>`;
}
