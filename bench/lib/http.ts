// The benchmarks' admin calls (a gateway's /admin, a simulated replica's /sim): loopback, so they
// answer in milliseconds or something is wrong, and a refusal is never taken for an answer.

const TIMEOUT_MS = 10_000;

/**
 * fetch with a timeout; a failure names the URL (undici's own message is only "fetch failed"), and
 * an answer that is not 2xx throws too, with its status and the start of its body.
 */
export async function call(url: string, init: RequestInit = {}, timeoutMs = TIMEOUT_MS): Promise<Response> {
  const what = `${init.method ?? 'GET'} ${url}`;
  let r: Response;
  try {
    r = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new Error(`${what} failed`, { cause: e });
  }
  if (!r.ok) {
    const body = await r.text().catch((e: Error) => `(body unreadable: ${e.message})`);
    throw new Error(`${what}: HTTP ${r.status}${body ? `: ${body.slice(0, 300)}` : ''}`);
  }
  return r;
}
