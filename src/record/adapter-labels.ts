/**
 * The label an adapter gets in the per-adapter metrics: its own name for the `topN` busiest by
 * recent traffic (decayed, half-life `halfLifeMs`), `other` for the rest. A name takes a free place
 * at once; the places are dealt again every `everyMs`, and a name that loses its place has its
 * series removed (`dropped`), so the series stay bounded by `topN` whatever the fleet serves.
 */
export function createAdapterLabels(opts: { topN: () => number; dropped: (adapter: string) => void; now?: () => number; halfLifeMs?: number; everyMs?: number }) {
  const now = opts.now ?? Date.now;
  const halfLife = opts.halfLifeMs ?? 300_000;
  const every = opts.everyMs ?? 10_000;
  // Adapter names come from requests a replica served: bounded by what the fleet serves, and cut here all the same.
  const MAX_TRACKED = 10_000;
  const traffic = new Map<string, { v: number; at: number }>();
  const labelled = new Set<string>();
  let dealtAt = now();

  const decayed = (x: { v: number; at: number }, t: number) => x.v * 2 ** (-(t - x.at) / halfLife);

  function deal(t: number) {
    dealtAt = t;
    const ranked = [...traffic].map(([name, x]) => [name, decayed(x, t)] as const).sort((a, b) => b[1] - a[1]);
    const keep = new Set(ranked.slice(0, opts.topN()).map(([name]) => name));
    for (const name of labelled) if (!keep.has(name)) { labelled.delete(name); opts.dropped(name); }
    for (const name of keep) labelled.add(name);
    // The long tail is forgotten: it would only ever be `other`.
    if (traffic.size > MAX_TRACKED) for (const [name] of ranked.slice(MAX_TRACKED / 2)) traffic.delete(name);
  }

  return {
    /** Counts one request of `adapter` and returns its label. */
    label(adapter: string): string {
      const t = now();
      const x = traffic.get(adapter);
      if (x === undefined) traffic.set(adapter, { v: 1, at: t });
      else { x.v = decayed(x, t) + 1; x.at = t; }
      if (t - dealtAt >= every) deal(t);
      if (!labelled.has(adapter) && labelled.size < opts.topN()) labelled.add(adapter);
      return labelled.has(adapter) ? adapter : 'other';
    },
  };
}
