import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderChat, TINY_KV } from '../../bench/sim/index.js';
import { createBlockPool } from '../../bench/sim/kv-cache.js';
import { chat, FAST, replica, text, user, waitFor } from './helpers.js';

const blockFloor = (n: number) => Math.floor((n - 1) / 16) * 16;

test('the second identical prompt hits the cache for all full blocks but the last token', async (t) => {
  const r = await replica(t, FAST);
  const messages = [{ role: 'system', content: text(300) }, ...user('What time is it?')];
  const tokens = renderChat(messages).length;
  const first = await chat(r.url, { messages, max_tokens: 2 });
  const second = await chat(r.url, { messages, max_tokens: 2 });
  assert.equal(first.usage?.prompt_tokens, tokens);
  assert.equal(first.usage?.prompt_tokens_details?.cached_tokens, 0);
  assert.equal(second.usage?.prompt_tokens_details?.cached_tokens, blockFloor(tokens));

  // A prompt that is an exact multiple of the block size still recomputes its last block.
  const exact = [{ role: 'user', content: text(64 - 9) }];
  assert.equal(renderChat(exact).length, 64);
  await chat(r.url, { messages: exact, max_tokens: 1 });
  const again = await chat(r.url, { messages: exact, max_tokens: 1 });
  assert.equal(again.usage?.prompt_tokens_details?.cached_tokens, 48);

  const c = r.counters();
  assert.equal(c.prefixCacheQueries, 2 * tokens + 2 * 64);
  assert.equal(c.prefixCacheHits, blockFloor(tokens) + 48);
});

test('a changed byte kills the hit from its block on; a late change keeps the prefix', async (t) => {
  const r = await replica(t, FAST);
  const base = text(400);
  await chat(r.url, { messages: user(base), max_tokens: 1 });
  const early = `${base.slice(0, 10)}X${base.slice(11)}`;
  const late = `${base.slice(0, 1400)}X${base.slice(1401)}`;
  const e = await chat(r.url, { messages: user(early), max_tokens: 1 });
  const l = await chat(r.url, { messages: user(late), max_tokens: 1 });
  // Byte 10 of the content is in token 5 (after BOS, <start_of_turn>, "user", "\n"): block 0.
  assert.equal(e.usage?.prompt_tokens_details?.cached_tokens, 0);
  // Byte 1400 is in token 354: blocks 0..21 (352 tokens) still match.
  assert.equal(l.usage?.prompt_tokens_details?.cached_tokens, 352);
});

test('cache_salt isolates prefixes', async (t) => {
  const r = await replica(t, FAST);
  const messages = user(text(200));
  const cached = async (salt?: string) =>
    (await chat(r.url, { messages, max_tokens: 1, ...(salt ? { cache_salt: salt } : {}) })).usage?.prompt_tokens_details
      ?.cached_tokens;
  assert.equal(await cached(), 0);
  assert.equal(await cached('tenant-a'), 0);
  assert.ok((await cached('tenant-a'))! > 0);
  assert.equal(await cached('tenant-b'), 0);
  assert.ok((await cached())! > 0);
});

test('the next turn hits through the previous answer when it is sent back verbatim', async (t) => {
  const r = await replica(t, FAST);
  const history = [{ role: 'system', content: text(200) }, ...user('first question')];
  const t1 = await chat(r.url, { messages: history, max_tokens: 40 });
  const t1Tokens = t1.usage!.prompt_tokens;
  history.push({ role: 'assistant', content: t1.content }, { role: 'user', content: 'and then?' });
  const t2 = await chat(r.url, { messages: history, max_tokens: 1 });
  // Everything up to the generated tokens is cached, beyond the first turn's prompt.
  assert.ok(t2.usage!.prompt_tokens_details!.cached_tokens >= blockFloor(t1Tokens + 39) - 16);
  assert.ok(t2.usage!.prompt_tokens_details!.cached_tokens > t1Tokens);
});

test('least recently freed blocks are evicted first, and a tail goes before its head', () => {
  const pool = createBlockPool(5); // 4 usable: vLLM keeps one as its null block
  const a = pool.allocate(2);
  a.forEach((id, i) => pool.cache(id, 100 + i));
  const b = pool.allocate(2);
  b.forEach((id, i) => pool.cache(id, 200 + i));
  assert.equal(pool.freeCount(), 0);
  assert.equal(pool.usage(), 1);
  pool.release(a);
  pool.release(b);
  // Cached but unreferenced blocks count as free, as in vLLM's kv_cache_usage.
  assert.equal(pool.usage(), 0);
  // A hit pins blocks: they leave the free queue.
  const hit = pool.lookup((i) => [200, 201][i], 2);
  assert.deepEqual(hit, b);
  pool.touch(hit);
  assert.equal(pool.canAllocate([], 3), false);
  // Eviction takes A's tail (hash 101) before its head (100).
  pool.allocate(1);
  assert.deepEqual(pool.lookup((i) => [100, 101][i], 2).length, 1);
  pool.allocate(1);
  assert.deepEqual(pool.lookup((i) => [100, 101][i], 2).length, 0);
  assert.deepEqual(pool.lookup((i) => [200, 201][i], 2), b, 'pinned blocks survive');
});

test('a small KV cache evicts old prefixes under pressure, tails first', async (t) => {
  const cachedFor = async (url: string, messages: unknown[]) =>
    (await chat(url, { messages, max_tokens: 1 })).usage!.prompt_tokens_details!.cached_tokens;
  const a = user(text(800, 'a')); // 809 tokens: 51 blocks
  const others = ['b', 'c', 'd'].map((s) => user(text(800, s)));

  const r1 = await replica(t, { ...FAST, ...TINY_KV }); // 128 blocks
  assert.equal(await cachedFor(r1.url, a), 0);
  assert.equal(await cachedFor(r1.url, a), blockFloor(809));
  // B takes 51 never-used blocks; C takes the last 26 of those and 25 of A's, A's tail first.
  await cachedFor(r1.url, others[0]);
  await cachedFor(r1.url, others[1]);
  assert.equal(await cachedFor(r1.url, a), 26 * 16);
  assert.ok(r1.counters().cachedBlocks <= 128);

  const r2 = await replica(t, { ...FAST, ...TINY_KV });
  await cachedFor(r2.url, a);
  for (const m of others) await cachedFor(r2.url, m);
  assert.equal(await cachedFor(r2.url, a), 0);
});

test('a request whose blocks do not fit waits in the queue until blocks are freed', async (t) => {
  const r = await replica(t, { ...FAST, ...TINY_KV, outputTokens: { min: 50, max: 50 } });
  // A holds 64 of 128 blocks while it decodes; B needs 94 and must wait for A's to be freed.
  const t0 = performance.now();
  const a = chat(r.url, { messages: user(text(1000, 'a')) });
  // A admitted (its blocks taken) before B is sent: a fixed head start could be too short for a
  // busy machine, and B would then take the blocks first.
  await waitFor(() => r.counters().running === 1, 2000, 'A running');
  const tb = performance.now();
  const b = await chat(r.url, { messages: user(text(1480, 'b')), max_tokens: 1 });
  const ra = await a;
  assert.ok(ra.done && b.done);
  assert.ok(tb + b.ttftMs! >= t0 + ra.totalMs - 5, 'B got its first token only after A finished');
  assert.equal(r.counters().preemptions, 0);
});

test('when the KV cache runs out mid-decode the newest request is preempted, recomputed, and both finish', async (t) => {
  const r = await replica(t, { ...FAST, ...TINY_KV, outputTokens: { min: 200, max: 200 } });
  // Both 899-token prompts fit (57 + 57 of the 127 usable blocks) but cannot both grow to 1099 tokens.
  const [ra, rb] = await Promise.all([
    chat(r.url, { messages: user(text(890, 'a')) }),
    chat(r.url, { messages: user(text(890, 'b')) }),
  ]);
  assert.ok(ra.done && rb.done);
  assert.equal(ra.usage?.completion_tokens, 200);
  assert.equal(rb.usage?.completion_tokens, 200);
  const c = r.counters();
  assert.equal(c.preemptions, 1);
  // Recomputation after preemption is not booked as a new prefix-cache query (vLLM counts it apart).
  assert.equal(c.prefixCacheQueries, ra.usage!.prompt_tokens + rb.usage!.prompt_tokens);
  assert.equal(c.kvUsage, 0);
});
