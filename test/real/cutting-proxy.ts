// A proxy that plays a replica dying mid-stream, for the real-server resume test.

import { createServer, request as httpRequest, type Server } from 'node:http';

/**
 * A loopback proxy to a replica that, once armed, cuts the next streamed chat after three content
 * chunks (the socket destroyed, as when the replica dies), and remembers the text it let through.
 */
export async function cuttingProxy(port: string) {
  let armed = false;
  let cuts = 0;
  let sent = '';
  const server: Server = createServer((req, res) => {
    const up = httpRequest({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      const cutThis = armed && req.url === '/v1/chat/completions' && String(ur.headers['content-type']).startsWith('text/event-stream');
      if (cutThis) armed = false;
      let buf = '';
      let contentChunks = 0;
      ur.on('data', (d: Buffer) => {
        if (!cutThis) return void res.write(d);
        buf += d.toString();
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i + 2);
          buf = buf.slice(i + 2);
          const m = /"delta":\{"content":("(?:[^"\\]|\\.)*")/.exec(ev);
          if (m && JSON.parse(m[1]) !== '') {
            sent += JSON.parse(m[1]);
            if (++contentChunks === 3) {
              cuts++;
              ur.destroy();
              // Cut only once the third chunk has left, so the gateway has all that was "sent".
              res.write(ev, () => res.socket?.destroy());
              return;
            }
          }
          res.write(ev);
        }
      });
      ur.on('end', () => res.end());
    });
    up.on('error', () => res.socket?.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    arm() { armed = true; sent = ''; },
    cuts: () => cuts,
    sentText: () => sent,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
