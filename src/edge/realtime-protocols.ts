// A realtime upgrade's subprotocols: the client key a browser sends among them, and the one the
// handshake answers with. A browser cannot set headers on a WebSocket, so OpenAI's realtime clients
// offer the key as a subprotocol: `new WebSocket(url, ['realtime', 'openai-insecure-api-key.<key>'])`
// (the beta clients add 'openai-beta.realtime-v1').

import { errors } from '../errors.js';
import type { ProtocolBy } from '../record/realtime.js';

export const KEY_PROTOCOL_PREFIX = 'openai-insecure-api-key.';

/**
 * A subprotocol name as RFC 6455 has it (an RFC 7230 token), as `ws` checks it: a list of distinct
 * ones passes `ws`'s parse when the client's upgrade is accepted, and a replica's.
 */
const TOKEN = /^[!#$%&'*+\-.0-9A-Z^_`|a-z~]+$/;

export const isKeyProtocol = (p: string) => p.startsWith(KEY_PROTOCOL_PREFIX);

export interface Offered {
  /** What goes on to the replica: everything offered but the key, in the client's order. */
  readonly relayed: readonly string[];
  /** The key of an `openai-insecure-api-key.<key>` subprotocol; null when none was offered. */
  readonly key: string | null;
}

/**
 * The subprotocols a Sec-WebSocket-Protocol header offers. `ws` parses the header only once the
 * upgrade is being accepted, after the key was checked and a replica opened, so the list is split
 * here; a header `ws` would refuse then is refused now, before anything reaches a replica. The
 * error never quotes the header: it may hold a key.
 */
export function offeredProtocols(header: string | undefined): Offered {
  if (header === undefined) return { relayed: [], key: null };
  const list = header.split(',').map((p) => p.replace(/^[ \t]+|[ \t]+$/g, ''));
  if (list.some((p) => !TOKEN.test(p)) || new Set(list).size !== list.length) {
    throw errors.invalidRequest(['Sec-WebSocket-Protocol must be a comma-separated list of distinct subprotocol names (RFC 6455)']);
  }
  const keys = list.filter(isKeyProtocol);
  if (keys.length > 1) throw errors.invalidRequest([`Offer one ${KEY_PROTOCOL_PREFIX}<key> subprotocol, not ${keys.length}`]);
  return { relayed: list.filter((p) => !isKeyProtocol(p)), key: keys.length === 1 ? keys[0].slice(KEY_PROTOCOL_PREFIX.length) : null };
}

/**
 * The subprotocol the client's handshake answers with, from those it offered (`ws`'s parse of its
 * header): the replica's selection when it made one (it was offered only what the client offered);
 * else the first offered that is not a key, because vLLM selects none and a browser fails a
 * handshake that offered subprotocols and got none back (the WHATWG WebSocket standard; RFC 6455
 * alone would allow it); never a key. Null: nothing may be selected.
 */
export function answeredProtocol(offered: ReadonlySet<string>, replicaSelected: string): { protocol: string; by: ProtocolBy } | null {
  if (replicaSelected !== '' && offered.has(replicaSelected) && !isKeyProtocol(replicaSelected)) return { protocol: replicaSelected, by: 'replica' };
  for (const p of offered) if (!isKeyProtocol(p)) return { protocol: p, by: 'gateway' };
  return null;
}
