// The passive tap of a realtime transcription connection: which of the frames going by are the few
// control events the gateway times (vLLM's realtime protocol: input_audio_buffer.commit,
// transcription.delta, transcription.done, session.created), read from a frame's first or last
// bytes without parsing it. Audio appends (base64, the bulk of the traffic) are never parsed.

/** How far from either end of a frame its `"type"` is looked for. */
const SNIFF_BYTES = 64;
/** A frame this small may be parsed whole when its type is neither at its start nor its end. */
const PARSE_BYTES = 512;
const TYPE_KEY = Buffer.from('"type"', 'latin1');
const QUOTE = 0x22;
const COLON = 0x3a;

const space = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** The value of the `"type"` key found between `from` and `to`, or null. */
function typeAt(buf: Buffer, from: number, to: number): string | null {
  const at = buf.subarray(from, to).indexOf(TYPE_KEY);
  if (at < 0) return null;
  let i = from + at + TYPE_KEY.length;
  while (i < buf.length && space(buf[i])) i++;
  if (buf[i++] !== COLON) return null;
  while (i < buf.length && space(buf[i])) i++;
  if (buf[i++] !== QUOTE) return null;
  const end = buf.indexOf(QUOTE, i);
  // Event names are short: a long value is not one of them.
  if (end < 0 || end - i > 48) return null;
  return buf.toString('latin1', i, end);
}

/**
 * The `type` of a JSON event frame, read cheaply: at its start (pydantic writes `type` first, as do
 * most clients), else at its end (`{"audio":"…","type":…}`), else, for a small frame only, by
 * parsing it. null: not found (a large frame with its type in the middle is an append or nothing
 * the gateway times).
 */
export function eventType(buf: Buffer): string | null {
  const head = typeAt(buf, 0, Math.min(buf.length, SNIFF_BYTES));
  if (head !== null || buf.length <= SNIFF_BYTES) return head;
  const tail = typeAt(buf, buf.length - SNIFF_BYTES, buf.length);
  if (tail !== null || buf.length > PARSE_BYTES) return tail;
  const parsed = parseSmall(buf);
  return typeof parsed?.type === 'string' ? parsed.type : null;
}

/** A small frame parsed, or null when it is not a JSON object. */
export function parseSmall(buf: Buffer): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(buf.toString('utf8'));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** One utterance's timings, as the tap saw them (performance.now() ms). */
export interface Utterance {
  /** Its first commit: the one that started the transcription. */
  readonly started: number;
  /** Its first transcription.delta; 0 when none came. */
  readonly firstDelta: number;
  /** Its last commit before transcription.done (the final one when the client sent it). */
  readonly lastCommit: number;
  /** Its transcription.done. */
  readonly done: number;
}

/**
 * The utterances of one connection: a commit while none is open starts one, later commits move its
 * last commit, its first delta and its done end it. Plain numbers, no allocation per frame.
 */
export class UtteranceTap {
  private started = 0;
  private lastCommit = 0;
  private firstDelta = 0;
  count = 0;

  commit(now: number): void {
    if (this.started === 0) this.started = now;
    this.lastCommit = now;
  }

  /** A delta: true when it is the utterance's first (the caller times it). */
  delta(now: number): boolean {
    if (this.started === 0 || this.firstDelta !== 0) return false;
    this.firstDelta = now;
    return true;
  }

  /** The utterance ended; null when no commit opened one (nothing to time). */
  done(now: number): Utterance | null {
    if (this.started === 0) return null;
    const u: Utterance = { started: this.started, firstDelta: this.firstDelta, lastCommit: this.lastCommit, done: now };
    this.started = 0;
    this.lastCommit = 0;
    this.firstDelta = 0;
    this.count++;
    return u;
  }
}
