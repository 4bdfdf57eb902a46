// HTTP/1.1 response framing for the replica connections (RFC 9112): status line and header
// fields, then the body by Content-Length, chunked coding, or until the connection closes.
// Bytes of the body are handed on as slices of the buffers the socket delivered: nothing is
// copied or decoded beyond the framing.

/** A response the replica sent that is not HTTP/1.1 we can frame. */
export class ProtocolError extends Error {
  readonly code = 'WR_BAD_RESPONSE';
}

export interface ResponseHead {
  status: number;
  /** Header fields as received, flat: name, value, name, value... */
  headers: string[];
  /** The connection may carry another request after this response. */
  keepAlive: boolean;
  /** Seconds from a `keep-alive: timeout=N` hint, when the replica sent one. */
  keepAliveHintS: number | null;
}

export interface ParserEvents {
  /** Both return false to stop parsing for good (the exchange was given up); pausing is the socket's business. */
  onHead(head: ResponseHead): boolean;
  onBody(chunk: Buffer): boolean;
  onEnd(): void;
}

export interface ResponseParser {
  /** Feeds bytes; throws ProtocolError on a malformed response. */
  execute(buf: Buffer): void;
  /** The connection closed: true when that completes the response (a close-delimited body). */
  eof(): boolean;
  /** Bytes arrived after the end of the response (a connection we must not reuse); set before onEnd. */
  readonly trailing: boolean;
  readonly started: boolean;
}

const enum S { Head, Length, Close, ChunkSize, ChunkExt, ChunkSizeEnd, ChunkData, ChunkDataEnd, Trailers, Done }

const CRLFCRLF = Buffer.from('\r\n\r\n');
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/;
const CONTENT_LENGTH = /^\d{1,15}$/;
const MAX_LINE = 4096;

export function createResponseParser(ev: ParserEvents, opts: { maxHeadBytes: number; noBody: boolean }): ResponseParser {
  let state = S.Head;
  let pending: Buffer | null = null;
  let remaining = 0;
  let line = '';
  let digits = 0;
  let extBytes = 0;
  let trailing = false;
  let started = false;

  function fail(why: string): never {
    throw new ProtocolError(`bad response from replica: ${why}`);
  }

  /** Parses one head; returns the offset just past it in `buf`, or -1 when incomplete. */
  function head(buf: Buffer, from: number): number {
    const all = pending === null ? buf : Buffer.concat([pending, buf]);
    const base = pending === null ? 0 : pending.length;
    const searchFrom = pending === null ? from : Math.max(0, pending.length - 3);
    const end = all.indexOf(CRLFCRLF, searchFrom);
    if (end < 0) {
      if (all.length - from > opts.maxHeadBytes) fail(`response head over ${opts.maxHeadBytes} bytes`);
      pending = from === 0 ? all : all.subarray(from);
      return -1;
    }
    const start = pending === null ? from : 0;
    pending = null;
    if (end - start > opts.maxHeadBytes) fail(`response head over ${opts.maxHeadBytes} bytes`);
    const lines = all.toString('latin1', start, end).split('\r\n');
    const m = STATUS_LINE.exec(lines[0]);
    if (m === null) fail(`status line ${JSON.stringify(lines[0].slice(0, 64))}`);
    const http11 = m[1] === '1';
    const status = Number(m[2]);
    const headers: string[] = [];
    let contentLength = -1;
    let chunked = false;
    let transferEncoded = false;
    let close = !http11;
    let keepAliveHintS: number | null = null;
    for (let i = 1; i < lines.length; i++) {
      const l = lines[i];
      const colon = l.indexOf(':');
      if (colon <= 0 || l.charCodeAt(0) === 32 || l.charCodeAt(0) === 9) fail(`header line ${JSON.stringify(l.slice(0, 64))}`);
      const name = l.slice(0, colon);
      if (name.includes(' ') || name.includes('\t')) fail(`header name ${JSON.stringify(name.slice(0, 64))}`);
      const value = l.slice(colon + 1).trim();
      headers.push(name, value);
      switch (name.length) {
        case 10: {
          const n = name.toLowerCase();
          if (n === 'connection') {
            const v = value.toLowerCase();
            if (v.includes('close')) close = true;
            else if (!http11 && v.includes('keep-alive')) close = false;
          } else if (n === 'keep-alive') {
            const t = /timeout=(\d+)/i.exec(value);
            if (t) keepAliveHintS = Number(t[1]);
          }
          break;
        }
        case 14:
          if (name.toLowerCase() === 'content-length') {
            // Repeated identical values (also as a list) are allowed; differing ones are not.
            for (const part of value.split(',')) {
              const p = part.trim();
              if (!CONTENT_LENGTH.test(p)) fail(`content-length ${JSON.stringify(value.slice(0, 32))}`);
              const n = Number(p);
              if (contentLength >= 0 && n !== contentLength) fail('differing content-length values');
              contentLength = n;
            }
          }
          break;
        case 17:
          if (name.toLowerCase() === 'transfer-encoding') {
            transferEncoded = true;
            const codings = value.toLowerCase().split(',');
            chunked = codings[codings.length - 1].trim() === 'chunked';
          }
          break;
      }
    }
    // Offset in `buf` (not in `all`) just past the blank line.
    const past = end + 4 - base;
    if (status >= 100 && status < 200) {
      if (status === 101) fail('101 switching protocols');
      // Interim responses (100 Continue, 103 Early Hints) precede the real one.
      state = S.Head;
      return past;
    }
    started = true;
    let keepAlive = !close;
    if (opts.noBody || status === 204 || status === 304) state = S.Done;
    else if (transferEncoded) {
      // RFC 9112 §6.3: Transfer-Encoding wins over Content-Length, and such a connection is closed after.
      if (contentLength >= 0) keepAlive = false;
      if (chunked) state = S.ChunkSize;
      else { state = S.Close; keepAlive = false; }
    } else if (contentLength >= 0) {
      remaining = contentLength;
      state = contentLength === 0 ? S.Done : S.Length;
    } else {
      state = S.Close;
      keepAlive = false;
    }
    if (!ev.onHead({ status, headers, keepAlive, keepAliveHintS })) return -2;
    return past;
  }

  /** Reads a CRLF-terminated line into `line`; returns the offset past it, or -1 when incomplete. */
  function readLine(buf: Buffer, at: number): number {
    const nl = buf.indexOf(10, at);
    const end = nl < 0 ? buf.length : nl;
    line += buf.toString('latin1', at, end);
    if (line.length > MAX_LINE) fail('chunk line too long');
    if (nl < 0) return -1;
    if (line.endsWith('\r')) line = line.slice(0, -1);
    return nl + 1;
  }

  return {
    get trailing() { return trailing; },
    get started() { return started; },
    execute(buf) {
      let at = 0;
      while (at < buf.length) {
        switch (state) {
          case S.Head: {
            const past = head(buf, at);
            if (past === -1) return;
            if (past === -2) { state = S.Done; return; }
            at = past;
            if ((state as S) === S.Done) { trailing = at < buf.length; ev.onEnd(); return; }
            break;
          }
          case S.Length: {
            const take = Math.min(remaining, buf.length - at);
            remaining -= take;
            const slice = at === 0 && take === buf.length ? buf : buf.subarray(at, at + take);
            at += take;
            if (!ev.onBody(slice)) { state = S.Done; return; }
            if (remaining === 0) { state = S.Done; trailing = at < buf.length; ev.onEnd(); return; }
            break;
          }
          case S.Close: {
            const slice = at === 0 ? buf : buf.subarray(at);
            at = buf.length;
            if (!ev.onBody(slice)) { state = S.Done; return; }
            break;
          }
          // The size line, byte by byte: it is read once per event of a stream, so no strings.
          case S.ChunkSize: {
            const c = buf[at++];
            const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
            if (d >= 0) {
              if (++digits > 12) fail('chunk size over 12 hex digits');
              remaining = remaining * 16 + d;
              break;
            }
            if (digits === 0) fail(`chunk size starts with byte ${c}`);
            if (c === 13) state = S.ChunkSizeEnd;
            else if (c === 10) state = remaining === 0 ? S.Trailers : S.ChunkData;
            else if (c === 59 || c === 32 || c === 9) state = S.ChunkExt;
            else fail(`byte ${c} in a chunk size`);
            break;
          }
          case S.ChunkExt: {
            // Chunk extensions mean nothing to a proxy: skipped to the end of the line.
            const nl = buf.indexOf(10, at);
            extBytes += (nl < 0 ? buf.length : nl) - at;
            if (extBytes > MAX_LINE) fail('chunk extension too long');
            if (nl < 0) return;
            at = nl + 1;
            extBytes = 0;
            state = remaining === 0 ? S.Trailers : S.ChunkData;
            break;
          }
          case S.ChunkSizeEnd: {
            if (buf[at++] !== 10) fail('CR without LF after a chunk size');
            state = remaining === 0 ? S.Trailers : S.ChunkData;
            break;
          }
          case S.ChunkData: {
            const take = Math.min(remaining, buf.length - at);
            remaining -= take;
            const slice = at === 0 && take === buf.length ? buf : buf.subarray(at, at + take);
            at += take;
            if (remaining === 0) state = S.ChunkDataEnd;
            if (!ev.onBody(slice)) { state = S.Done; return; }
            break;
          }
          case S.ChunkDataEnd: {
            const c = buf[at++];
            if (c === 10) {
              state = S.ChunkSize;
              digits = 0;
            } else if (c !== 13) fail('missing CRLF after chunk data');
            break;
          }
          case S.Trailers: {
            const past = readLine(buf, at);
            if (past < 0) return;
            at = past;
            const empty = line.length === 0;
            line = '';
            if (empty) {
              state = S.Done;
              trailing = at < buf.length;
              ev.onEnd();
              return;
            }
            break;
          }
          case S.Done:
            trailing = true;
            return;
        }
      }
    },
    eof() {
      if (state !== S.Close) return false;
      state = S.Done;
      ev.onEnd();
      return true;
    },
  };
}
