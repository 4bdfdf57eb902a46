/**
 * The floor of any Node.js proxy on this machine: node:http in, one undici Agent out, bytes piped,
 * nothing else (no routing, no metrics, no logs, no error handling). What warmroute adds above
 * this line is its own work; what this adds above nginx is Node's.
 *   tsx bench/overhead/raw-proxy.ts --port N --upstream URL
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { Agent, type Dispatcher } from 'undici';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
const origin = new URL(values.upstream!).origin;
const agent = new Agent({ connections: null, pipelining: 1 });

createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    agent.dispatch({ origin, path: req.url!, method: 'POST', headers: ['content-type', 'application/json'], body: Buffer.concat(parts) }, {
      onRequestStart() {},
      onResponseStart(_c, status) { res.writeHead(status, ['content-type', 'text/event-stream']); },
      onResponseData: (_c, chunk) => { res.write(chunk); },
      onResponseEnd: () => { res.end(); },
      onResponseError: (_c, e) => { res.destroy(e); },
    } as Dispatcher.DispatchHandler);
  });
}).listen(Number(values.port), '127.0.0.1', () => console.log(`raw proxy listening ${values.port}`));
