/**
 * The floor of any Node proxy hop: a TCP pipe, one upstream socket per client socket, bytes both
 * ways, no HTTP at all. What is left between this and nginx is libuv and the kernel.
 *   tsx bench/overhead/tcp-pipe.ts --port N --upstream URL
 */
import { connect, createServer } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
const up = new URL(values.upstream!);

createServer((client) => {
  client.setNoDelay(true);
  const upstream = connect(Number(up.port), up.hostname);
  upstream.setNoDelay(true);
  client.on('data', (d) => upstream.write(d));
  upstream.on('data', (d) => client.write(d));
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());
  client.on('error', () => {});
  upstream.on('error', () => {});
}).listen(Number(values.port), '127.0.0.1', () => console.log(`tcp pipe listening ${values.port}`));
