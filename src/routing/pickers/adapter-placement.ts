import { rendezvousRank } from '../rendezvous.js';
import type { ReplicaView } from '../types.js';
import type { PickInput } from './affinity.js';
import { cheapestByCost } from './min-ttft.js';

/**
 * A new session of a LoRA adapter: among the candidates under the soft load bound, those of the
 * best slot tier (its adapter at home, else a free slot), when that leaves some out; there, the
 * capacity placement's choice if it is one of them, else the rendezvous of its key (the cheapest
 * without a key). −1 when the tiers leave nobody out: the usual placement decides.
 */
export function adapterPlaced(p: PickInput, soft: (i: number) => boolean): number {
  const tier = p.adapter?.tier;
  if (!tier) return -1;
  let best = Infinity;
  let worst = -Infinity;
  for (let i = 0; i < tier.length; i++) {
    if (!soft(i)) continue;
    if (tier[i] < best) best = tier[i];
    if (tier[i] > worst) worst = tier[i];
  }
  if (best === worst) return -1;
  const eligible = (i: number) => soft(i) && tier[i] === best;
  if (p.byCapacity && p.byCapacity.index >= 0 && eligible(p.byCapacity.index)) return p.byCapacity.index;
  const c = p.candidates;
  if (p.placementKey !== null) {
    const open: ReplicaView[] = [];
    for (let i = 0; i < c.length; i++) if (eligible(i)) open.push(c[i].replica);
    const first = rendezvousRank(p.placementKey, open)[0];
    return c.findIndex((x) => x.replica === first);
  }
  return cheapestByCost(c.map((x) => x.estimateMs - x.bonusMs), eligible, p.tieMs, p.random);
}
