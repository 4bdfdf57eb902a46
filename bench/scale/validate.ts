// The discrete-event run checked against a socket run of the same size: the same sessions, the
// same router, the same simulator models, one in virtual time and one through real processes.
// The hit rate is the router's and the caches' doing and must agree closely. TTFT in the socket
// run also carries the gateway, the loopback and, on a shared machine, CPU the simulator waited
// for: it agrees within a looser band, and the report gives both figures.

import type { ScaleRow } from './rows.js';

/** Hit rates within this many points (absolute). */
export const HIT_RATE_TOLERANCE = 0.03;
/** TTFT percentiles within this share of the socket figure, or this many ms, whichever is larger. */
export const TTFT_TOLERANCE = { share: 0.5, ms: 30 };

export interface Validation {
  replicas: number;
  sessions: number;
  hitRate: { socket: number; des: number; ok: boolean };
  ttftP50Ms: { socket: number; des: number; ok: boolean };
  ttftP90Ms: { socket: number; des: number; ok: boolean };
  ok: boolean;
}

const within = (socket: number, des: number) => Math.abs(socket - des) <= Math.max(TTFT_TOLERANCE.share * socket, TTFT_TOLERANCE.ms);

export function validate(socket: ScaleRow, des: ScaleRow): Validation {
  const hitRate = { socket: socket.hitRate, des: des.hitRate, ok: Math.abs(socket.hitRate - des.hitRate) <= HIT_RATE_TOLERANCE };
  const ttftP50Ms = { socket: socket.ttftP50Ms, des: des.ttftP50Ms, ok: within(socket.ttftP50Ms, des.ttftP50Ms) };
  const ttftP90Ms = { socket: socket.ttftP90Ms, des: des.ttftP90Ms, ok: within(socket.ttftP90Ms, des.ttftP90Ms) };
  return { replicas: socket.replicas, sessions: socket.sessions, hitRate, ttftP50Ms, ttftP90Ms, ok: hitRate.ok && ttftP50Ms.ok && ttftP90Ms.ok };
}
