/** Calls `f` every 10 ms until it returns true or `ms` pass; returns how long it took, or throws. */
export async function waitFor(what: string, f: () => boolean | Promise<boolean>, ms = 2_000): Promise<number> {
  const t0 = performance.now();
  while (!(await f())) {
    if (performance.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return performance.now() - t0;
}
