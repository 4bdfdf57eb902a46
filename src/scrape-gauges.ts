import type { Registry } from './fleet/registry.js';
import type { zeroKnownSeries } from './known-series.js';
import type { Admission } from './queue/admission.js';
import type { Limiter } from './queue/limiter.js';
import type { Router } from './routing/types.js';
import type { Metrics } from './telemetry/metrics.js';

export interface ScrapeGaugeSources {
  readonly metrics: Metrics;
  readonly known: ReturnType<typeof zeroKnownSeries>;
  readonly registry: Registry;
  readonly router: Router;
  readonly admission: Admission;
  readonly globalLimit: Limiter;
}

/**
 * Routing and queue state as gauges, computed when Prometheus scrapes (the admin port's
 * beforeScrape) rather than per request.
 */
export function createScrapeGauges(s: ScrapeGaugeSources): () => void {
  const { metrics, known, registry, router, admission, globalLimit } = s;
  const zeroed = new Set<string>();
  return () => {
    const pins = router.pinsByReplica();
    const t = Date.now();
    // Replicas that left: zeroed again should they come back (their series are removed, fleet/membership.ts).
    if (zeroed.size > registry.replicas.length) for (const name of zeroed) if (registry.byName(name) === undefined) zeroed.delete(name);
    for (const r of registry.replicas) {
      // Every replica's failure series exist from its first scrape at 0, so rate() sees a first burst.
      if (!zeroed.has(r.name)) {
        zeroed.add(r.name);
        known.replica(r.name);
      }
      metrics.sessionsPinned.set({ replica: r.name }, pins.get(r.name) ?? 0);
      metrics.inflight.set({ replica: r.name }, r.inflight);
      metrics.queued.set({ replica: r.name }, admission.queuedOn(r.name));
      metrics.scrapeAge.set({ replica: r.name }, r.lastScrapeAt === null ? -1 : (t - r.lastScrapeAt) / 1000);
      metrics.kvCapacity.set({ replica: r.name }, r.kvCapacityTokens ?? -1);
      metrics.loraFreeSlots.set({ replica: r.name }, r.lora === null ? -1 : Math.max(0, r.lora.maxLoras - r.lora.running.size));
    }
    metrics.globalInflight.set(globalLimit.open);
    metrics.globalQueued.set(globalLimit.queued);
    const st = router.stats();
    metrics.prefixEntries.set(st.prefixEntries);
    metrics.responseRecords.set(st.responseRecords);
    for (const [replica, ms] of st.retentionByReplica) if (registry.byName(replica)) metrics.retention.set({ replica }, ms / 1000);
    for (const [replica, kb] of st.kvBlocksByReplica) if (registry.byName(replica)) metrics.kvBlocks.set({ replica }, kb.blocks);
    // Placement's own estimate (routing/working-set.ts): each agent's shared prompt once plus the
    // sessions active there recently, in the replica's tokens; 0 until its capacity is scraped.
    for (const r of registry.replicas) metrics.workingSet.set({ replica: r.name }, Math.round(st.workingSetTokensByReplica.get(r.name) ?? 0));
  };
}
