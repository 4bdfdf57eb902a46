/**
 * node:http + undici with fastify in between: the same bare forwarding as raw-proxy.ts, the
 * request going through a fastify route first (request/reply objects, hooks, content-type
 * parsing). Its distance from node:http+undici is what serving the data plane from fastify would
 * cost warmroute on every request (docs/design-notes.md, "One edge").
 *   tsx bench/overhead/fastify-proxy.ts --port N --upstream URL
 */
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { Agent, type Dispatcher } from 'undici';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
const origin = new URL(values.upstream!).origin;
const agent = new Agent({ connections: null, pipelining: 1 });
const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_r, body, done) => done(null, body));
app.post('/v1/chat/completions', (req, reply) => {
  reply.hijack();
  const res = reply.raw;
  agent.dispatch({ origin, path: req.url, method: 'POST', headers: ['content-type', 'application/json'], body: req.body as Buffer }, {
    onRequestStart() {},
    onResponseStart(_c, status) { res.writeHead(status, ['content-type', 'text/event-stream']); },
    onResponseData: (_c, chunk) => { res.write(chunk); },
    onResponseEnd: () => { res.end(); },
    onResponseError: (_c, e) => { res.destroy(e); },
  } as Dispatcher.DispatchHandler);
});
await app.listen({ host: '127.0.0.1', port: Number(values.port) });
console.log(`fastify proxy listening ${values.port}`);
