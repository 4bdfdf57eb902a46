/**
 * The candidate a mistyped name most likely meant, or null when none is close: "did you mean".
 * Optimal string alignment distance (an adjacent swap counts as one edit, as in `nmae` → `name`),
 * accepted up to a third of the longer name (at least 1, at most 3 edits), and a plural or
 * singular of a candidate (`headerMs` → `headersMs`) counts as one edit like any other.
 */
export function nearestName(input: string, candidates: Iterable<string>): string | null {
  const wanted = input.toLowerCase();
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(wanted, candidate.toLowerCase());
    const allowed = Math.min(3, Math.max(1, Math.floor(Math.max(wanted.length, candidate.length) / 3)));
    if (d <= allowed && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  // Three rows of the dynamic-programming table: the swap rule looks two rows back.
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2] + 1);
      current.push(d);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length];
}
