/**
 * The simple upstream of the overhead benchmark: an OpenAI-style SSE stream whose first content
 * chunk goes out as soon as the request is read, then a few more chunks. Nothing to compute, so
 * whatever a proxy adds shows up in the client's TTFT.
 *   tsx bench/overhead/upstream.ts --port N [--chunks 8]
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' }, chunks: { type: 'string', default: '8' } } });
const chunks = Number(values.chunks);

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
    // The rest one per tick, like tokens leaving a decode loop.
    const next = () => {
      if (i < TOKENS.length) { res.write(TOKENS[i++]); setImmediate(next); } else res.end(END);
    };
    setImmediate(next);
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(values.port), '127.0.0.1', () => console.log(`upstream listening ${values.port}`));
