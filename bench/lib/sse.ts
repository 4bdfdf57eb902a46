/**
 * Incremental SSE reader for benchmark clients: feed it text as it arrives; it calls `onData` with
 * the payload of each complete `data:` event (including `[DONE]`) and keeps the partial rest.
 */
export function createSseReader(onData: (data: string) => void): (text: string) => void {
  let buf = '';
  return (text) => {
    buf += text;
    let at: number;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (event.startsWith('data: ')) onData(event.slice(6));
    }
  };
}
