/**
 * The floor of a Node proxy built on node:http: requests parsed by node:http, forwarded over one
 * raw keep-alive socket per client connection, the replica's response bytes written to the
 * client's socket untouched (no response parsing at all). Good only for this benchmark's one
 * upstream and its well-behaved responses.
 *   tsx bench/overhead/socket-proxy.ts --port N --upstream URL
 */
import { createServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
const up = new URL(values.upstream!);
const upstreamOf = new WeakMap<Socket, Socket>();

createServer((req, res) => {
  const client = req.socket;
  let u = upstreamOf.get(client);
  if (!u) {
    const s = connect(Number(up.port), up.hostname);
    s.setNoDelay(true);
    s.on('data', (d) => client.write(d));
    s.on('error', () => client.destroy());
    client.on('close', () => s.destroy());
    upstreamOf.set(client, (u = s));
  }
  const upstream = u;
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const body = parts.length === 1 ? parts[0] : Buffer.concat(parts);
    upstream.cork();
    upstream.write(`POST ${req.url} HTTP/1.1\r\nhost: ${up.host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
    upstream.write(body);
    upstream.uncork();
  });
  // The response goes out on the raw socket: keep node:http from writing one of its own.
  res.detachSocket(client);
}).listen(Number(values.port), '127.0.0.1', () => console.log(`socket proxy listening ${values.port}`));
