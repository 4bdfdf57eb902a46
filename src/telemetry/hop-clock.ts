import type { Hop } from './metrics.js';

/**
 * Marks of one request on the monotonic clock (ms, fractional). Each hop is the difference of two
 * consecutive marks, so the hops up to the first token partition the TTFT exactly:
 * parse + route + queue + connect + upstream_headers + upstream_first_token = TTFT.
 */
export interface HopClock {
  received: number;
  parsed: number;
  routed: number;
  admitted: number;
  /** Connection to the replica acquired (or opened) and the request written to it (last attempt). */
  sent: number;
  upstreamHeaders: number;
  firstToken: number;
  ended: number;
}

/**
 * Monotonic clock in ms, fractional. performance.now() reads the same clock as process.hrtime
 * (libuv's uv_hrtime) without allocating a BigInt per mark; a request takes eight marks.
 */
export function nowMs(): number {
  return performance.now();
}

export function startClock(received = nowMs()): HopClock {
  return { received, parsed: 0, routed: 0, admitted: 0, sent: 0, upstreamHeaders: 0, firstToken: 0, ended: 0 };
}

const span = (from: number, to: number) => (from > 0 && to > 0 ? to - from : null);

/** Hop durations in ms; null for a hop the request never reached. */
export function hopsOf(c: HopClock): Record<Hop, number | null> {
  return {
    parse: span(c.received, c.parsed),
    route: span(c.parsed, c.routed),
    queue: span(c.routed, c.admitted),
    connect: span(c.admitted, c.sent),
    upstream_headers: span(c.sent, c.upstreamHeaders),
    upstream_first_token: span(c.upstreamHeaders, c.firstToken),
    stream: span(c.firstToken, c.ended),
  };
}

export function ttftOf(c: HopClock): number | null {
  return span(c.received, c.firstToken);
}

/**
 * The replica's own time to first token: request written → first token bytes. It spans two hops
 * (upstream_headers + upstream_first_token); the cost model learns from it.
 */
export function replicaTtftOf(c: HopClock): number | null {
  return span(c.sent, c.firstToken);
}

/** The gateway's own share of the TTFT: everything before the request reached the replica. */
export function overheadOf(c: HopClock): number | null {
  return span(c.received, c.sent);
}

/** `Server-Timing` value for the hops known when the response headers go out. */
export function serverTiming(c: HopClock): string {
  const h = hopsOf(c);
  const f = (v: number | null) => (v === null ? 0 : v).toFixed(3);
  return `parse;dur=${f(h.parse)}, route;dur=${f(h.route)}, queue;dur=${f(h.queue)}, connect;dur=${f(h.connect)}, upstream_headers;dur=${f(h.upstream_headers)}`;
}
