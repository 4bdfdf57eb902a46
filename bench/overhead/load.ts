import { Pool } from 'undici';

const FIRST = Buffer.from('word0');

/** A chat body of about `kb` KiB: a long byte-stable system prompt plus a short exchange. */
export function benchBody(kb: number): string {
  const sentence = 'You are a helpful voice agent for a public service line; answer briefly and confirm details. ';
  const system = sentence.repeat(Math.max(1, Math.round((kb * 1024) / sentence.length)));
  return JSON.stringify({
    model: 'bench', stream: true, max_tokens: 32,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: 'I need to report a broken street light.' },
      { role: 'assistant', content: 'Sure. Where is it?' },
      { role: 'user', content: 'On the corner of Main and 3rd.' },
    ],
  });
}

/** Client-side TTFT in ms: request sent → first chunk holding the first content token. */
export async function ttftOnce(pool: Pool, body: string, session: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await pool.request({
    path: '/v1/chat/completions', method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body,
  });
  let ttft = -1;
  for await (const chunk of res.body) {
    if (ttft < 0 && (chunk as Buffer).indexOf(FIRST) >= 0) ttft = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  if (res.statusCode !== 200 || ttft < 0) throw new Error(`bad response ${res.statusCode}`);
  return ttft;
}

/** `total` requests over `concurrency` workers, each worker its own session. */
export async function closedLoop(pool: Pool, body: string, concurrency: number, total: number, tag: string): Promise<number[]> {
  const out: number[] = [];
  let issued = 0;
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => {
    while (issued < total) {
      issued++;
      out.push(await ttftOnce(pool, body, `${tag}-${w}`));
    }
  }));
  return out;
}
