/**
 * tsx bench/realtime-relay-cpu.ts [FRAMES (20000)] [BYTES (900)] — the CPU the realtime relay's own
 * frame path costs, apart from the machine's scheduling: one process holds a client, the relay's
 * pipe() both ways (src/upstream/realtime-relay.ts, with the gateway's ws options) and an echo
 * replica; FRAMES audio appends of BYTES are sent pipelined, straight to the echo replica and
 * through the relay, 3 times each after a warm-up; the process's CPU per frame echoed, median.
 * Run it with WS_NO_BUFFER_UTIL=1 to see what masking in JavaScript costs.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import WebSocket, { WebSocketServer } from 'ws';
import { pipe } from '../src/upstream/realtime-relay.js';

const N = Number(process.argv[2] ?? 20000);
const SIZE = Number(process.argv[3] ?? 900);
const listen = async (s: ReturnType<typeof createServer>) => { await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r())); return (s.address() as AddressInfo).port; };
const echoSrv = createServer();
const echo = new WebSocketServer({ server: echoSrv, perMessageDeflate: false });
echo.on('connection', (ws) => ws.on('message', (d, b) => ws.send(d as Buffer, { binary: b })));
const echoPort = await listen(echoSrv);
const gwSrv = createServer();
const gw = new WebSocketServer({ noServer: true, perMessageDeflate: false, skipUTF8Validation: true, clientTracking: false });
gwSrv.on('upgrade', (req, sock, head) => {
  const up = new WebSocket(`ws://127.0.0.1:${echoPort}`, { perMessageDeflate: false, skipUTF8Validation: true });
  up.once('open', () => gw.handleUpgrade(req, sock, head, (client) => {
    const side = { activity() {}, message() {} };
    pipe(client, up, side);
    pipe(up, client, side);
  }));
});
const gwPort = await listen(gwSrv);
const frame = JSON.stringify({ type: 'input_audio_buffer.append', audio: randomBytes(Math.round(SIZE * 0.75) - 40).toString('base64') });
async function run(port: number): Promise<number> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false });
  await new Promise((r) => ws.once('open', r));
  let got = 0;
  const done = new Promise<void>((r) => ws.on('message', () => { if (++got === N) r(); }));
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    if (ws.bufferedAmount > 256 * 1024) await new Promise<void>((r) => ws.send(frame, () => r()));
    else ws.send(frame);
  }
  await done;
  const c = process.cpuUsage(c0);
  ws.close();
  return (c.user + c.system) / N;
}
await run(echoPort); await run(gwPort);
const d: number[] = [], g: number[] = [];
for (let i = 0; i < 3; i++) { d.push(await run(echoPort)); g.push(await run(gwPort)); }
const med = (x: number[]) => [...x].sort((a, b) => a - b)[1];
console.log(`masking ${process.env.WS_NO_BUFFER_UTIL ? 'in JavaScript' : 'native (bufferutil)'}, frame ${frame.length} B: direct ${med(d).toFixed(1)} µs/frame, via relay ${med(g).toFixed(1)}, relay adds ${(med(g) - med(d)).toFixed(1)}`);
process.exit(0);
