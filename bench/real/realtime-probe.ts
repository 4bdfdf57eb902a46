// `tsx bench/real/realtime-probe.ts --url ws://HOST:PORT [--model M] [--utterances N] [--seconds S]`:
// one realtime transcription session against a vLLM replica or a gateway in front of it. Each
// utterance streams S seconds of PCM16 at 16 kHz in 100 ms appends, commits, sends the final
// commit, and times commit → first transcription.delta and final commit → transcription.done.
// `--fleet` instead: the realtime replica of `npm run fleet:vllm -- --realtime`, directly and
// through a gateway started here (the compiled one when built), one session each, their
// utterances taken in turns so that both see the same machine.

import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { percentiles } from '../lib/percentiles.js';
import { gatewayConfigFile, startWarmroute } from '../overhead/targets.js';
import { readState } from './fleet-vllm.js';

export interface UtteranceTiming { firstDeltaMs: number; doneMs: number; deltas: number; text: string }

/** A tone with a little noise: any audio will do for random weights, but silence is too easy to special-case. */
export function pcm16(seconds: number, seed = 1): Buffer {
  const n = Math.round(seconds * 16_000);
  const buf = Buffer.alloc(n * 2);
  let h = seed >>> 0;
  for (let i = 0; i < n; i++) {
    h = (Math.imul(h, 1664525) + 1013904223) >>> 0;
    const s = 0.3 * Math.sin((2 * Math.PI * 220 * i) / 16_000) + 0.05 * ((h / 2 ** 32) * 2 - 1);
    buf.writeInt16LE(Math.round(s * 32_767), i * 2);
  }
  return buf;
}

interface Event { type: string; delta?: string; text?: string; error?: unknown; code?: string }

/** An open session: session.created read, session.update sent; `next` waits for one event of a type. */
export class RealtimeSession {
  private queue: Event[] = [];
  private waiters: ((e: Event) => void)[] = [];
  private constructor(readonly ws: WebSocket, readonly created: Event) {}

  static async open(url: string, model: string, headers: Record<string, string> = {}, timeoutMs = 30_000): Promise<RealtimeSession> {
    const ws = new WebSocket(url, { headers });
    const first = await new Promise<Event>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no session.created from ${url} in ${timeoutMs} ms`)), timeoutMs);
      ws.once('message', (d) => { clearTimeout(t); resolve(JSON.parse(String(d)) as Event); });
      ws.once('error', (e) => { clearTimeout(t); reject(e); });
      ws.once('unexpected-response', (_req, res) => { clearTimeout(t); reject(new Error(`upgrade refused: ${res.statusCode}`)); });
    });
    if (first.type !== 'session.created') throw new Error(`first event ${JSON.stringify(first)}`);
    const s = new RealtimeSession(ws, first);
    ws.on('message', (d) => s.push(JSON.parse(String(d)) as Event));
    ws.send(JSON.stringify({ type: 'session.update', model }));
    return s;
  }

  private push(e: Event): void {
    const w = this.waiters.shift();
    if (w) w(e); else this.queue.push(e);
  }

  /** The next event; an `error` event throws. */
  async next(timeoutMs: number): Promise<Event> {
    const e = this.queue.shift() ?? await new Promise<Event>((resolve, reject) => {
      const t = setTimeout(() => { this.waiters.splice(this.waiters.indexOf(done), 1); reject(new Error(`no event in ${timeoutMs} ms`)); }, timeoutMs);
      const done = (ev: Event) => { clearTimeout(t); resolve(ev); };
      this.waiters.push(done);
    });
    if (e.type === 'error') throw new Error(`realtime error: ${JSON.stringify(e)}`);
    return e;
  }

  /**
   * One utterance. vLLM starts the generation at the first commit and reads audio until the final
   * one, so the audio is appended first and the two commits sent back to back: what is timed is
   * the model's work on the utterance, not the pace of the audio.
   */
  async utterance(audio: Buffer, timeoutMs = 60_000): Promise<UtteranceTiming> {
    for (let off = 0; off < audio.length; off += 3_200) {
      this.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: audio.subarray(off, off + 3_200).toString('base64') }));
    }
    const t0 = performance.now();
    this.ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
    this.ws.send(JSON.stringify({ type: 'input_audio_buffer.commit', final: true }));
    let firstDeltaMs = -1;
    let deltas = 0;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const e = await this.next(Math.max(1, deadline - Date.now()));
      if (e.type === 'transcription.delta') {
        if (firstDeltaMs < 0) firstDeltaMs = performance.now() - t0;
        deltas++;
      } else if (e.type === 'transcription.done') {
        return { firstDeltaMs, doneMs: performance.now() - t0, deltas, text: e.text ?? '' };
      }
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.ws.readyState === WebSocket.CLOSED) { resolve(); return; }
      const t = setTimeout(() => { this.ws.terminate(); resolve(); }, 5_000);
      this.ws.once('close', () => { clearTimeout(t); resolve(); });
      this.ws.close(1000);
    });
  }
}

const wsUrl = (http: string) => `${http.replace(/^http/, 'ws').replace(/\/$/, '')}/v1/realtime`;

/** The sum and count of a histogram's series on the gateway's /metrics. */
async function histogram(adminUrl: string, name: string, replica: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const read = (suffix: string) => Number(new RegExp(`^${name}_${suffix}\\{replica="${replica}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { sum: read('sum'), count: read('count') };
}

async function compare(utterances: number, seconds: number): Promise<void> {
  const f = readState();
  if (!f?.realtime) throw new Error('no realtime replica in the fleet state: npm run fleet:vllm -- --realtime');
  const rt = f.realtime;
  const gw = await startWarmroute('', ['--config', gatewayConfigFile({ upstreams: [{ name: rt.name, url: rt.url }] }), '--log-level', 'warn']);
  try {
    for (let i = 0; ; i++) {
      const r = (await (await fetch(`${gw.adminUrl}/admin/replicas`)).json()) as { replicas: { state: string }[] };
      if (r.replicas.every((x) => x.state === 'up')) break;
      if (i === 100) throw new Error('the gateway did not see the realtime replica up within 10 s');
      await new Promise((res) => setTimeout(res, 100));
    }
    const paths = { direct: await RealtimeSession.open(wsUrl(rt.url), rt.model), gateway: await RealtimeSession.open(`${wsUrl(gw.url)}?model=${rt.model}`, rt.model) };
    const rows: Record<keyof typeof paths, UtteranceTiming[]> = { direct: [], gateway: [] };
    try {
      // One utterance each first, not counted: the replica's first encoder pass and the gateway's JIT.
      for (const s of Object.values(paths)) await s.utterance(pcm16(seconds, 99));
      for (let i = 0; i < utterances; i++) {
        const order: (keyof typeof paths)[] = i % 2 === 0 ? ['direct', 'gateway'] : ['gateway', 'direct'];
        for (const k of order) rows[k].push(await paths[k].utterance(pcm16(seconds, i + 1)));
      }
    } finally { for (const s of Object.values(paths)) await s.close(); }
    const fmt = (xs: number[]) => { const p = percentiles(xs); return { p50: +p.p50.toFixed(1), p90: +p.p90.toFixed(1), max: +Math.max(...xs).toFixed(1) }; };
    for (const k of ['direct', 'gateway'] as const) {
      console.log(JSON.stringify({ path: k, utterances: rows[k].length, seconds, firstDeltaMs: fmt(rows[k].map((r) => r.firstDeltaMs)), doneMs: fmt(rows[k].map((r) => r.doneMs)), deltasPerUtterance: fmt(rows[k].map((r) => r.deltas)) }));
    }
    // The same audio went both ways in each round: the per-round difference takes out how much the
    // model had to say, which varies far more between rounds than the relay could add.
    const diff = (k: 'firstDeltaMs' | 'doneMs') => fmt(rows.gateway.map((r, i) => r[k] - rows.direct[i][k]));
    console.log(JSON.stringify({ gatewayMinusDirectPerRound: { firstDeltaMs: diff('firstDeltaMs'), doneMs: diff('doneMs') } }));
    const fd = await histogram(gw.adminUrl!, 'warmroute_realtime_first_delta_seconds', rt.name);
    const done = await histogram(gw.adminUrl!, 'warmroute_realtime_done_seconds', rt.name);
    console.log(JSON.stringify({ gatewayMeasured: { utterances: fd.count, firstDeltaMeanMs: +(1000 * fd.sum / fd.count).toFixed(1), doneMeanMs: +(1000 * done.sum / done.count).toFixed(1) } }));
  } finally { await gw.child?.stop(); }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    url: { type: 'string' }, model: { type: 'string', default: 'tiny-asr' }, fleet: { type: 'boolean' },
    utterances: { type: 'string', default: '5' }, seconds: { type: 'string', default: '2' },
  } });
  if (values.fleet) return compare(Number(values.utterances), Number(values.seconds));
  if (!values.url) throw new Error('--url ws://HOST:PORT (or --fleet) is required');
  const url = values.url.endsWith('/v1/realtime') ? values.url : `${values.url.replace(/\/$/, '')}/v1/realtime`;
  const s = await RealtimeSession.open(url, values.model!);
  const rows: UtteranceTiming[] = [];
  try {
    for (let i = 0; i < Number(values.utterances); i++) {
      const r = await s.utterance(pcm16(Number(values.seconds), i + 1));
      rows.push(r);
      console.log(JSON.stringify({ utterance: i, firstDeltaMs: +r.firstDeltaMs.toFixed(1), doneMs: +r.doneMs.toFixed(1), deltas: r.deltas, text: r.text.slice(0, 60) }));
    }
  } finally { await s.close(); }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(JSON.stringify({ url, utterances: rows.length, firstDeltaMedianMs: +med(rows.map((r) => r.firstDeltaMs)).toFixed(1), doneMedianMs: +med(rows.map((r) => r.doneMs)).toFixed(1) }));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
}
