/**
 * A warning that can repeat per request (a fallback many requests take at once) is logged at most
 * once per interval, with how many were not: the metric counts each one, the log says it is
 * happening without a line per request.
 */
export function throttle(intervalMs: number, now: () => number = Date.now): () => number | null {
  let last = -Infinity;
  let suppressed = 0;
  return () => {
    const t = now();
    if (t - last < intervalMs) {
      suppressed++;
      return null;
    }
    last = t;
    const n = suppressed;
    suppressed = 0;
    return n;
  };
}
