import { errors } from '../errors.js';

/** A request target as the gateway routes and forwards it: origin-form, path normalised. */
export interface Target {
  /** Normalised path: unreserved characters decoded, no dot segments, no empty segments. */
  readonly path: string;
  /** `?…` as received, or ''. */
  readonly search: string;
}

/** Encoded characters that would let a path say one thing to the gateway and another to a replica. */
const FORBIDDEN_ENCODED = /%(?:2f|5c|00|25)/i;
/** Percent-encoded unreserved characters (RFC 3986 §2.3): equivalent to the character itself. */
const ENCODED_UNRESERVED = /%(?:[46][1-9a-f]|[57][0-9a]|3[0-9]|2d|2e|5f|7e)/gi;
const decodeUnreserved = (m: string) => String.fromCharCode(parseInt(m.slice(1), 16));

/**
 * The request target as the gateway routes and forwards it.
 *
 * An absolute-form target (`POST http://host/v1/chat/completions`, sent by clients configured
 * with an HTTP proxy) is reduced to its path and query (RFC 9112 §3.2.2), so it takes the same
 * route as any other request and never reaches a replica as a URL. The path is then normalised:
 * percent-encoded unreserved characters decoded (RFC 3986 §6.2.2.2: `%63ompletions` is
 * `completions`, as the replica's server decodes it, so it takes the chat route with validation
 * and affinity, not a passthrough), `.` and `..` segments resolved (RFC 3986 §5.2.4), empty
 * segments dropped. Other encodings stay as they are (and match no route).
 * An encoded slash, backslash, NUL or percent, or a `..` that climbs above the root, is a 400:
 * those have no meaning a replica and the gateway would agree on. The replica is sent the
 * normalised path, so what was checked is what is forwarded.
 */
export function requestTarget(raw: string | undefined): Target {
  let target = raw ?? '';
  if (target.startsWith('http://') || target.startsWith('https://')) {
    let u: URL;
    try {
      u = new URL(target);
    } catch {
      throw errors.invalidRequest(['The request target is not a valid URL']);
    }
    target = u.pathname + u.search;
  }
  if (target[0] !== '/') throw errors.invalidRequest(['The request target must be a path']);
  const q = target.indexOf('?');
  const rawPath = q < 0 ? target : target.slice(0, q);
  const search = q < 0 ? '' : target.slice(q);
  // The common case: nothing to normalise.
  if (rawPath.indexOf('%') < 0 && rawPath.indexOf('/.') < 0 && rawPath.indexOf('//') < 0 && rawPath.indexOf('\\') < 0) {
    return { path: rawPath, search };
  }
  if (FORBIDDEN_ENCODED.test(rawPath) || rawPath.includes('\\')) {
    throw errors.invalidRequest(['The request path holds an encoded slash, backslash, NUL or percent sign']);
  }
  const out: string[] = [];
  for (const seg of rawPath.replace(ENCODED_UNRESERVED, decodeUnreserved).split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (out.length === 0) throw errors.invalidRequest(['The request path climbs above the root']);
      out.pop();
      continue;
    }
    out.push(seg);
  }
  return { path: `/${out.join('/')}`, search };
}
