// One progress line: rewritten in place on a terminal; on a pipe or a CI log, plain lines, only
// when the phase changes or every few seconds, so logs stay readable.

export interface ProgressLine {
  (text: string): void;
  /** Clears the line (TTY) before normal output. */
  done(): void;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr, everyMs = 5000): ProgressLine {
  const tty = stream.isTTY === true;
  let lastPhase = '';
  let lastAt = 0;
  let shown = false;
  const line = ((text: string) => {
    if (tty) {
      // A pseudo-terminal may report 0 columns: then do not cut at all.
      const width = stream.columns && stream.columns > 20 ? stream.columns - 1 : 400;
      stream.write(`\r\x1b[K${text.slice(0, width)}`);
      shown = true;
      return;
    }
    // The phase is the text before the first digit of a counter: "[2/4 affinity] 120/560 ..." → "[2/4 affinity]".
    const phase = text.replace(/\s\d.*$/, '');
    const now = Date.now();
    if (phase === lastPhase && now - lastAt < everyMs) return;
    lastPhase = phase;
    lastAt = now;
    stream.write(`${text}\n`);
  }) as ProgressLine;
  line.done = () => {
    if (tty && shown) stream.write('\r\x1b[K');
    shown = false;
  };
  return line;
}
