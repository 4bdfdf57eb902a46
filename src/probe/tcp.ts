// TCP connect time to an endpoint's host, measured apart from the HTTP requests so the report can
// show how much of the TTFT floor the network itself could explain.

import { lookup } from 'node:dns/promises';
import { connect } from 'node:net';

import { asConnectionError, type EndpointAddress } from './endpoint.js';

export interface TcpTarget {
  address: string;
  port: number;
}

/**
 * Resolves the host once (DNS is not part of a warm request's cost) and picks the first address
 * that accepts a connection, so `localhost` works whether the server bound ::1 or 127.0.0.1.
 */
export async function resolveTcpTarget(addr: EndpointAddress, timeoutMs: number): Promise<TcpTarget> {
  let candidates: { address: string }[];
  try {
    candidates = await lookup(addr.hostname, { all: true });
  } catch (err) {
    throw asConnectionError(addr, err) ?? err;
  }
  let lastErr: unknown;
  for (const c of candidates) {
    try {
      await connectOnce(c.address, addr.port, timeoutMs);
      return { address: c.address, port: addr.port };
    } catch (err) {
      lastErr = err;
    }
  }
  throw asConnectionError(addr, lastErr) ?? lastErr;
}

/** Milliseconds from connect() to the 'connect' event (SYN to established), socket then closed. */
export function connectOnce(address: string, port: number, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const socket = connect({ host: address, port });
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      reject(Object.assign(new Error(`TCP connect to ${address}:${port} timed out`), { code: 'UND_ERR_CONNECT_TIMEOUT' }));
    });
    socket.once('connect', () => {
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      socket.destroy();
      resolve(ms);
    });
    socket.once('error', (err) => {
      socket.destroy();
      reject(err);
    });
  });
}
