/**
 * The reference a first version of warmroute would have been: fastify + @fastify/reply-from,
 * one upstream, no routing, no metrics. Kept to show, in the same run, what the direct undici
 * forwarder saves.   tsx bench/overhead/naive-proxy.ts --port N --upstream URL
 */
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import replyFrom from '@fastify/reply-from';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
const app = Fastify({ logger: false });
await app.register(replyFrom, { base: values.upstream, undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 } });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_r, body, done) => done(null, body));
app.post('/v1/chat/completions', (req, reply) => reply.from(req.url));
await app.listen({ host: '127.0.0.1', port: Number(values.port) });
console.log(`naive proxy listening ${values.port}`);
