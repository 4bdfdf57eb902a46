/**
 * Indices of the allowed items, cheapest first. Items whose cost is within `tieMs` of the cheapest
 * tie, and one of them is drawn at random for the front: without that, equal replicas would be
 * taken in list order and the first one would collect every tie. The rest are in cost order (the
 * failover order), ties among them left in index order since nothing is decided there.
 */
export function rankByCost(
  cost: readonly number[],
  allowed: (i: number) => boolean,
  tieMs: number,
  random: () => number,
): number[] {
  const order: number[] = [];
  for (let i = 0; i < cost.length; i++) if (allowed(i)) order.push(i);
  if (order.length < 2) return order;
  order.sort((a, b) => cost[a] - cost[b] || a - b);
  let ties = 1;
  while (ties < order.length && cost[order[ties]] - cost[order[0]] <= tieMs) ties++;
  if (ties > 1) {
    const k = Math.min(ties - 1, Math.floor(random() * ties));
    [order[0], order[k]] = [order[k], order[0]];
  }
  return order;
}

/**
 * rankByCost(...)[0] (−1 when nothing is allowed), drawing the same random number for the same
 * ties, in one pass instead of a sort of every candidate.
 */
export function cheapestByCost(cost: readonly number[], allowed: (i: number) => boolean, tieMs: number, random: () => number): number {
  let min = -1;
  let count = 0;
  for (let i = 0; i < cost.length; i++) {
    if (!allowed(i)) continue;
    count++;
    if (min < 0 || cost[i] < cost[min]) min = i;
  }
  if (count < 2) return min;
  const ties: number[] = [];
  for (let i = 0; i < cost.length; i++) if (allowed(i) && cost[i] - cost[min] <= tieMs) ties.push(i);
  if (ties.length < 2) return min;
  ties.sort((a, b) => cost[a] - cost[b] || a - b);
  return ties[Math.min(ties.length - 1, Math.floor(random() * ties.length))];
}

/**
 * The `limit` cheapest allowed items in rankByCost's order (ties drawn among those kept): a
 * failover list needs no more than the forwarder will try.
 */
export function rankCheapest(cost: readonly number[], allowed: (i: number) => boolean, tieMs: number, random: () => number, limit: number): number[] {
  const kept: number[] = [];
  for (let i = 0; i < cost.length; i++) {
    if (!allowed(i)) continue;
    if (kept.length === limit && cost[i] >= cost[kept[limit - 1]]) continue;
    let j = kept.length === limit ? limit - 1 : kept.length;
    while (j > 0 && cost[kept[j - 1]] > cost[i]) {
      kept[j] = kept[j - 1];
      j--;
    }
    kept[j] = i;
  }
  // Already in (cost, index) order: the tie at the front is drawn as rankByCost draws it.
  if (kept.length < 2) return kept;
  let ties = 1;
  while (ties < kept.length && cost[kept[ties]] - cost[kept[0]] <= tieMs) ties++;
  if (ties > 1) {
    const k = Math.min(ties - 1, Math.floor(random() * ties));
    [kept[0], kept[k]] = [kept[k], kept[0]];
  }
  return kept;
}
