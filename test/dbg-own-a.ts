import { request } from 'undici';
import { startGateway, chatBody } from './helpers/gateway.js';
import { rawResponse, startRawReplica } from './helpers/raw-replica.js';
const body = '{"id":"x"}';
const replica = await startRawReplica((req) => {
  req.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
  setTimeout(() => req.socket.write(rawResponse(200, [['content-type', 'application/json'], ['content-length', String(body.length)]], body)), 30);
});
const g = await startGateway([replica.url], { limits: { maxRetries: 0 } });
const res = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody({ stream: false }) });
console.log(res.statusCode, await res.body.text());
await new Promise((r) => setTimeout(r, 100));
console.log(g.logs.filter((l) => l.msg === 'request'));
await g.close(); await replica.close();
