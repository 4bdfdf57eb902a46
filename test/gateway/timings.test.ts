import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'undici';
import { accessLines, chatBody, fixtureAndGateway, waitForAccess } from '../helpers/gateway.js';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('per-hop time accounting', () => {
  const env = fixtureAndGateway();

  it('hops add up to the TTFT on every request (access line), and the TTFT matches what the client measured', async () => {
    const client = new Client(env.g.url); // a Client is one connection
    const measured: number[] = [];
    try {
      // Warm the connection so the client's clock and the gateway's start at the same moment.
      await (await client.request({ path: '/v1/models', method: 'GET' })).body.text();
      for (let i = 0; i < 12; i++) {
        const t0 = performance.now();
        const res = await client.request({
          path: '/v1/chat/completions', method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': 'timed', 'x-fixture-gap-ms': '30' },
          body: chatBody(),
        });
        let text = '';
        let ttft = 0;
        for await (const c of res.body) {
          text += c.toString();
          if (!ttft && text.includes('"content":"tok0')) ttft = performance.now() - t0;
        }
        measured.push(ttft);
      }
    } finally {
      await client.close();
    }
    const timed = (ls: Record<string, any>[]) => ls.filter((l) => l.session !== undefined && l.path === '/v1/chat/completions');
    const lines = timed(await waitForAccess(env.g, (ls) => timed(ls).length >= 12));
    assert.equal(lines.length, 12);
    const diffs: number[] = [];
    for (const [i, l] of lines.entries()) {
      const sum = l.parseMs + l.routeMs + l.queueMs + l.connectMs + l.upstreamHeadersMs + l.upstreamFirstTokenMs;
      // Each field is rounded to the microsecond: six of them can be off by 3 µs in all.
      assert.ok(Math.abs(sum - l.ttftMs) <= 0.004, `hops sum ${sum} vs ttft ${l.ttftMs}`);
      assert.ok(l.replicaTtftMs >= 25, 'the replica\'s 30 ms wait before the first token is the replica\'s time');
      assert.ok(Math.abs(l.replicaTtftMs - (l.upstreamHeadersMs + l.upstreamFirstTokenMs)) <= 0.002, 'the replica\'s own TTFT spans both upstream hops');
      assert.ok(l.overheadMs >= 0 && l.overheadMs < l.ttftMs);
      // The client's clock starts before the gateway's and stops after it: never shorter.
      assert.ok(measured[i] >= l.ttftMs - 0.01, `request ${i}: the client measured ${measured[i]} ms, the gateway ${l.ttftMs} ms`);
      diffs.push(measured[i] - l.ttftMs);
    }
    // The wait falls after the response head (medians: a busy machine can delay one head's handling).
    assert.ok(median(lines.map((l) => l.upstreamFirstTokenMs)) >= 20, 'the 30 ms wait belongs to upstream_first_token');
    // What lies between the two clocks is the loopback trip and this machine's scheduling, which
    // can only add to a request, and on a busy machine adds a few ms to most of them: the closest
    // pair, not the median, shows whether the gateway's clock starts late or stops early.
    assert.ok(Math.min(...diffs) <= 2, `client vs gateway TTFT differ by at least ${Math.min(...diffs)} ms`);
  });

  it('in the metrics too: the hop histograms up to the first token sum to the TTFT histogram', async () => {
    const text = await (await fetch(`${env.g.adminUrl}/metrics`)).text();
    const sumOf = (re: RegExp) => [...text.matchAll(re)].reduce((s, m) => s + Number(m[1]), 0);
    const hops = ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token']
      .map((h) => sumOf(new RegExp(`warmroute_hop_duration_seconds_sum\\{hop="${h}"\\} (\\S+)`, 'g')));
    const ttft = sumOf(/warmroute_ttft_seconds_sum\{route="[^"]+"\} (\S+)/g);
    const ttftCount = sumOf(/warmroute_ttft_seconds_count\{route="[^"]+"\} (\S+)/g);
    assert.ok(ttftCount >= 12, `${ttftCount} requests with a TTFT`);
    const total = hops.reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(total - ttft) < 1e-6 * ttftCount, `hops ${total} s vs TTFT ${ttft} s over ${ttftCount} requests`);
  });

  it('exports hop, TTFT, overhead, request, decision, replica and token metrics with bounded labels', async () => {
    const res = await fetch(`${env.g.adminUrl}/metrics`);
    const text = await res.text();
    for (const hop of ['parse', 'route', 'queue', 'connect', 'upstream_headers', 'upstream_first_token', 'stream']) {
      assert.match(text, new RegExp(`warmroute_hop_duration_seconds_bucket\\{le="0.0001",hop="${hop}"\\}`));
    }
    assert.match(text, /warmroute_ttft_seconds_count\{route="(placed|pinned)"\} \d+/);
    assert.match(text, /warmroute_gateway_overhead_seconds_count \d+/);
    assert.match(text, /warmroute_requests_total\{replica="127\.0\.0\.1:\d+",route="pinned",code="2xx"\} \d+/);
    assert.match(text, /warmroute_route_decisions_total\{reason="pinned"\} \d+/);
    assert.match(text, /warmroute_replica_up\{replica="127\.0\.0\.1:\d+"\} 1/);
    assert.match(text, /warmroute_inflight\{replica="127\.0\.0\.1:\d+"\} 0/);
    assert.match(text, /warmroute_prompt_tokens_total\{replica="127\.0\.0\.1:\d+"\} \d+/);
    assert.match(text, /warmroute_cached_tokens_total\{replica="127\.0\.0\.1:\d+"\} 384/); // 12 × 32
    assert.ok(!text.includes('timed'), 'a session id leaked into a metric label');
    assert.ok(!text.includes('fixture-model'), 'a client model string leaked into a metric label');
  });

  it('logs one access line per request with hops, never the prompt text', async () => {
    const before = env.g.logs.length;
    const logged = accessLines(env.g.logs).length;
    const res = await fetch(`${env.g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'secret-session' }, body: chatBody({}, 'my card number is 4242') });
    await res.text();
    // Its access line is the last thing a request logs: once it is in, every line of it is.
    await waitForAccess(env.g, (ls) => ls.length > logged);
    const lines = env.g.logs.slice(before);
    assert.equal(lines.length, 1);
    const l = lines[0];
    assert.equal(l.msg, 'request');
    assert.equal(l.level, 30);
    assert.match(l.session, /^[0-9a-f]{12}$/);
    assert.equal(l.sessionSource, 'header:x-session-id');
    assert.equal(l.promptTokens > 0, true);
    assert.equal(l.cachedTokens, 32);
    assert.equal(l.done, true);
    const raw = JSON.stringify(lines);
    // The prompt phrase, not its digits: the epoch-ms `time` field can contain any four digits.
    assert.ok(!raw.includes('card number') && !raw.includes('secret-session'));
  });

  // Last: its request would change the counts the tests above read.
  it('a replica slow to read a large body: its time is upstream_headers, not the gateway\'s connect', async () => {
    const res = await fetch(`${env.g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'big-body', 'x-fixture-read-delay-ms': '300' },
      // 4 MB: well past the loopback socket buffers, so the write cannot complete until the replica reads.
      body: chatBody({}, 'x'.repeat(4 * 1024 * 1024)),
    });
    assert.equal(res.status, 200);
    await res.text();
    const st = Object.fromEntries(res.headers.get('server-timing')!.split(', ').map((p) => {
      const [name, dur] = p.split(';dur=');
      return [name, Number(dur)];
    }));
    assert.ok(st.connect < 150, `connect ${st.connect} ms holds only the gateway's part`);
    assert.ok(st.upstream_headers >= 250, `upstream_headers ${st.upstream_headers} ms holds the replica's late read`);
  });

});
