const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const MODEL = Buffer.from('"model"');

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The index just past the JSON string starting at `i` (a quote), escapes skipped; -1 when it never ends. */
function stringEnd(b: Buffer, i: number): number {
  // The next quote not escaped: found natively (strings are most of a body), its backslashes counted.
  let j = b.indexOf(QUOTE, i + 1);
  while (j >= 0) {
    let k = j - 1;
    while (b[k] === BACKSLASH) k--;
    if ((j - 1 - k) % 2 === 0) return j + 1;
    j = b.indexOf(QUOTE, j + 1);
  }
  return -1;
}

/**
 * The body with its top-level `model` string replaced by `model`, every other byte as received:
 * one pass over the bytes that skips strings, not a parse and an encode of the whole document.
 * The body was parsed already (valid JSON, an object). null when the key is not found spelled
 * plainly (`"model"`, no escapes) with a string value at the top level: the caller re-encodes then.
 */
export function withModel(body: Buffer, model: string): Buffer | null {
  const ranges: [number, number][] = [];
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === QUOTE) {
      const end = stringEnd(body, i);
      if (end < 0) return null;
      // A key of the top-level object: `"model"` followed by a colon and a string value.
      if (depth === 1 && end - i === MODEL.length && body.compare(MODEL, 0, MODEL.length, i, end) === 0) {
        let j = end;
        while (j < body.length && isSpace(body[j])) j++;
        if (body[j] === COLON) {
          j++;
          while (j < body.length && isSpace(body[j])) j++;
          if (body[j] !== QUOTE) return null;
          const vEnd = stringEnd(body, j);
          if (vEnd < 0) return null;
          ranges.push([j, vEnd]);
          i = vEnd - 1;
          continue;
        }
      }
      i = end - 1;
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  if (ranges.length === 0) return null;
  const value = Buffer.from(JSON.stringify(model));
  const parts: Buffer[] = [];
  let from = 0;
  // JSON.parse keeps the last of repeated keys; every one is replaced, so none can disagree.
  for (const [s, e] of ranges) {
    parts.push(body.subarray(from, s), value);
    from = e;
  }
  parts.push(body.subarray(from));
  return Buffer.concat(parts);
}
