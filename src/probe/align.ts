// Plain-text table columns: padded to the widest cell, left-aligned where asked, right otherwise.

export function align(rows: string[][], leftCols: Set<number>): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r) =>
    r
      .map((cell, c) => (leftCols.has(c) ? cell.padEnd(widths[c]) : cell.padStart(widths[c])))
      .join('  ')
      .trimEnd(),
  );
}
