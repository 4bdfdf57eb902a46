import type { IncomingHttpHeaders } from 'node:http';
import type { SessionKeySourceConfig } from '../config/schema.js';
import { errors } from '../errors.js';

// The session key from its ordered sources (routing.sessionKeySources): headers, body fields, and
// a field of a body object (`metadata.user_id`).

type Body = Record<string, unknown>;

/** What finding the session key reads of the identity options (identity.ts). */
export interface SessionKeyOptions {
  /**
   * Ordered sources of the session key; the first enabled source holding a non-empty string (or a
   * number) wins. A string is shorthand for an enabled source: `header:<name>` or `body:<field>`.
   */
  readonly sessionKeySources: readonly SessionKeySourceConfig[];
  /** Longer keys are a 400 `session_key_too_long` (keys land in memory and in Redis). */
  readonly maxSessionKeyBytes: number;
}

const CONTROL = /[\u0000-\u001f\u007f]/;

/** `nested`: a body field inside an object field (`metadata.user_id`): [object field, its field]. */
interface CompiledSource { readonly header: boolean; readonly name: string; readonly label: string; readonly nested: readonly [string, string] | null }

/** Sources are parsed once per options object, not per request. */
const compiledSources = new WeakMap<SessionKeyOptions, readonly CompiledSource[]>();

function sourcesOf(opts: SessionKeyOptions): readonly CompiledSource[] {
  let c = compiledSources.get(opts);
  if (c !== undefined) return c;
  const sources: CompiledSource[] = [];
  for (const s of opts.sessionKeySources) {
    let src: { from: string; name: string; enabled?: boolean };
    if (typeof s === 'string') {
      const colon = s.indexOf(':');
      src = { from: s.slice(0, colon), name: s.slice(colon + 1) };
      if (src.from !== 'header' && src.from !== 'body') throw new Error(`session key source ${JSON.stringify(s)}: expected header:<name> or body:<field>`);
    } else {
      src = s;
    }
    if (src.enabled === false || src.name === '') continue;
    const name = src.from === 'header' ? src.name.toLowerCase() : src.name;
    const dot = src.from === 'body' ? name.indexOf('.') : -1;
    sources.push({ header: src.from === 'header', name, label: `${src.from}:${name}`, nested: dot > 0 ? [name.slice(0, dot), name.slice(dot + 1)] : null });
  }
  c = sources;
  compiledSources.set(opts, c);
  return c;
}

const fieldOf = (v: unknown, name: string): unknown => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Body)[name] : undefined);

/** The session key from the first enabled source that has one; over-long keys are a 400. */
export function sessionKeyOf(
  body: Body | null,
  headers: IncomingHttpHeaders,
  opts: SessionKeyOptions,
): { key: string; source: string } | null {
  const maxKeyBytes = opts.maxSessionKeyBytes;
  for (const src of sourcesOf(opts)) {
    let value: unknown = src.header ? headers[src.name] : body === null ? undefined : src.nested === null ? body[src.name] : fieldOf(body[src.nested[0]], src.nested[1]);
    if (Array.isArray(value)) value = value[0];
    if (typeof value === 'number' && Number.isFinite(value)) value = String(value);
    if (typeof value !== 'string' || value.length === 0) continue;
    // A key lands in logs (hashed), Redis keys and pub/sub messages: control characters have no
    // business in one.
    if (CONTROL.test(value)) throw errors.invalidRequest([`The session key from ${src.label} holds control characters`], src.header ? null : src.name);
    // Cheap bound first: a UTF-16 length within max/3 cannot exceed max bytes.
    if (value.length * 3 > maxKeyBytes) {
      const bytes = Buffer.byteLength(value);
      if (bytes > maxKeyBytes) {
        throw errors.sessionKeyTooLong([src.label, bytes, maxKeyBytes], src.header ? null : src.name);
      }
    }
    return { key: value, source: src.label };
  }
  return null;
}
