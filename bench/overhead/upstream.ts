/**
 * The simple upstream of the overhead benchmark: an OpenAI-style SSE stream whose first content
 * chunk goes out as soon as the request is read, then a few more chunks. Nothing to compute, so
 * whatever a proxy adds shows up in the client's TTFT.
 * With --kv-port (and --kv-replay-port), it also publishes vLLM-format KV cache events (bench/sim's
 * publisher) as a replica at steady state does: each request stores a couple of new blocks (its
 * reply) on its session's chain, and the oldest are removed past a pool of KV_POOL_BLOCKS.
 * --chunk-gap-ms G: the chunks after the first G ms apart instead of one per tick. One per tick,
 * a proxy may find the whole answer waiting in one read (one write to its client) or read each
 * chunk as it comes (a read and a write each), depending on how the processes share the cores;
 * G ms apart (a decode loop is 10–50 ms per token), every proxy reads every chunk on its own.
 *   tsx bench/overhead/upstream.ts --port N [--chunks 8] [--chunk-gap-ms 0] [--kv-port P --kv-replay-port R]
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { startKvPublisher, type SimKvPublisher } from '../sim/kv-events.js';

const { values } = parseArgs({ options: { port: { type: 'string' }, chunks: { type: 'string', default: '8' }, 'chunk-gap-ms': { type: 'string', default: '0' }, 'kv-port': { type: 'string' }, 'kv-replay-port': { type: 'string' } } });
const chunks = Number(values.chunks);
const gapMs = Number(values['chunk-gap-ms']);
const later = (f: () => void) => (gapMs > 0 ? void setTimeout(f, gapMs) : void setImmediate(f));

const KV_POOL_BLOCKS = 4096;
const BLOCK_TOKENS = 16;
const kv: SimKvPublisher | null = values['kv-port'] === undefined ? null
  : await startKvPublisher('127.0.0.1', { port: Number(values['kv-port']), replayPort: Number(values['kv-replay-port'] ?? 0) });
let nextBlock = 1;
let oldest = 1;
/** A request's reply, stored as two new blocks on the chain; the oldest evicted past the pool. */
function publishKv(): void {
  if (kv === null) return;
  for (let b = 0; b < 2; b++, nextBlock++) kv.sink.stored(nextBlock, nextBlock > 1 ? nextBlock - 1 : null, Array.from({ length: BLOCK_TOKENS }, (_, t) => (nextBlock * BLOCK_TOKENS + t) % 32000), BLOCK_TOKENS);
  while (nextBlock - oldest > KV_POOL_BLOCKS) kv.sink.removed(oldest++);
}

const event = (delta: object, finish: string | null = null) =>
  `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${JSON.stringify(finish)}}]}\n\n`;
const ROLE = event({ role: 'assistant', content: '' });
const TOKENS = Array.from({ length: chunks }, (_, i) => event({ content: ` word${i}` }));
const END = event({}, 'stop') + 'data: [DONE]\n\n';

const server = createServer((req, res) => {
  if (req.url === '/health') return void res.end();
  if (req.url === '/v1/models') return void res.end('{"object":"list","data":[{"id":"bench","object":"model","owned_by":"vllm"}]}');
  if (req.url === '/metrics') return void res.end('vllm:num_requests_waiting{model_name="bench"} 0\nvllm:num_requests_running{model_name="bench"} 0\n');
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(ROLE + TOKENS[0]);
    let i = 1;
    // The rest one per tick (or --chunk-gap-ms apart), like tokens leaving a decode loop.
    const next = () => {
      if (i < TOKENS.length) { res.write(TOKENS[i++]); later(next); } else { res.end(END); publishKv(); }
    };
    later(next);
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(values.port), '127.0.0.1', () => console.log(`upstream listening ${values.port}`));
