// A browser's client key on the realtime WebSocket: a browser cannot set headers on a WebSocket, so
// OpenAI's clients offer the key as a subprotocol (`openai-insecure-api-key.<key>`). The gateway
// checks it as it checks the header, never passes it on, and answers the handshake with a
// subprotocol the client offered that is not the key.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { request, WebSocket as StandardWebSocket } from 'undici';
import { accessLines, startGateway, type TestGateway } from '../helpers/gateway.js';
import { dial, rawExchange, refusedWith } from '../helpers/realtime-client.js';
import { waitFor } from '../helpers/wait.js';
import { startWsReplica, type WsReplica } from '../helpers/ws-replica.js';

const BROWSER_KEY = 'sk-browser-0123456789abcdef';
const SERVER_KEY = 'sk-server-fedcba9876543210';
const REPLICA_KEY = 'replica-secret-key';
const keyProtocol = (key: string) => `openai-insecure-api-key.${key}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const nameOf = (url: string) => url.replace('http://', '');

async function gateway(r: WsReplica, raw: Record<string, any> = {}): Promise<TestGateway> {
  const g = await startGateway([], {
    upstreams: [{ url: r.url, apiKey: REPLICA_KEY }],
    auth: { apiKeys: [{ name: 'browser', sha256: sha256(BROWSER_KEY), maxConcurrent: 1 }, { name: 'server', sha256: sha256(SERVER_KEY), maxConcurrent: 0 }] },
    // A failed assertion leaves connections open: the gateway's close does not wait long for them.
    timeouts: { drainMs: 300 },
    ...raw,
  });
  await waitFor('replica up', () => g.gw.registry.replicas.every((x) => x.up && x.models !== null), 5_000);
  return g;
}

async function metricsText(g: TestGateway): Promise<string> {
  const res = await request(`${g.adminUrl}/metrics`);
  return res.body.text();
}

const realtimeLines = (g: TestGateway) => accessLines(g.logs).filter((l) => l.path === '/v1/realtime');

async function closedAndLogged(g: TestGateway, n: number): Promise<Record<string, any>[]> {
  await waitFor(`${n} realtime access lines`, () => g.gw.realtime.open === 0 && realtimeLines(g).length === n, 3_000);
  return realtimeLines(g);
}

/** What the replica was offered, per upgrade it received. */
const offeredToReplica = (r: WsReplica) => r.upgrades.map((u) => u.headers['sec-websocket-protocol'] ?? '');

/** A WebSocket upgrade written by hand, with `protocol` as its Sec-WebSocket-Protocol. */
const upgradeRequest = (protocol: string, extra = '') => `GET /v1/realtime HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-version: 13\r\nsec-websocket-key: ${randomBytes(16).toString('base64')}\r\nsec-websocket-protocol: ${protocol}\r\n${extra}\r\n`;

/** Nothing that could hold a key anywhere it is recorded: log lines (the access line among them) and metrics. */
async function keysNowhere(g: TestGateway, keys: string[]): Promise<void> {
  const logs = JSON.stringify(g.logs);
  const metrics = await metricsText(g);
  for (const key of keys) {
    assert.ok(!logs.includes(key), `a log line holds ${key}`);
    assert.ok(!metrics.includes(key), `the metrics hold ${key}`);
  }
  assert.ok(!logs.includes('openai-insecure-api-key.'), 'a log line holds a key subprotocol');
}

describe('realtime: a client key offered as a subprotocol', () => {
  it('is accepted as the header is, counted against its key\'s maxConcurrent, and never reaches the replica', async () => {
    const r = await startWsReplica();
    const g = await gateway(r);
    try {
      // What OpenAI's realtime clients offer in a browser.
      const protocols = ['realtime', keyProtocol(BROWSER_KEY), 'openai-beta.realtime-v1'];
      const c = await dial(g, { protocols, query: '?session_id=call-7' });
      await waitFor('session.created', () => c.got.length === 1);
      assert.match(c.got[0][0].toString(), /^\{"type":"session.created"/);
      assert.equal(c.ws.protocol, 'realtime', 'the replica\'s selection, passed on');
      c.ws.send('hello');
      await waitFor('the echo', () => c.got.length === 2);

      assert.deepEqual(offeredToReplica(r), ['realtime, openai-beta.realtime-v1'], 'the key subprotocol stays at the gateway');
      assert.equal(r.upgrades[0].headers.authorization, `Bearer ${REPLICA_KEY}`, 'the replica gets its own key');

      const over = await refusedWith(dial(g, { protocols }));
      assert.equal(over.status, 429, 'the key by subprotocol holds a slot of its maxConcurrent (1)');
      assert.equal(over.body.error.code, 'rate_limit_exceeded');
      assert.match(over.body.error.message, /^API key browser already has 1 requests in flight/);

      c.ws.close(1000);
      await c.closed;
      const lines = await closedAndLogged(g, 2);
      const accepted = lines.find((l) => l.status === 101)!;
      assert.equal(accepted.key, 'browser');
      assert.equal(accepted.protocol, 'realtime');
      assert.equal(accepted.sessionSource, 'body:session_id');
      assert.equal(r.upgrades.length, 1, 'the refused one never reached the replica');
      await keysNowhere(g, [BROWSER_KEY, REPLICA_KEY]);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('a wrong, empty or missing key is a 401 in OpenAI\'s shape on the upgrade response: the socket never opens', async () => {
    const r = await startWsReplica();
    const g = await gateway(r);
    try {
      for (const protocols of [['realtime', keyProtocol('sk-wrong-key-xyz')], ['realtime', 'openai-insecure-api-key.'], [keyProtocol('sk-wrong-key-xyz')], ['realtime', 'openai-beta.realtime-v1']]) {
        const refused = await refusedWith(dial(g, { protocols }));
        assert.equal(refused.status, 401, protocols.join(', '));
        assert.equal(refused.body.error.type, 'invalid_request_error');
        assert.equal(refused.body.error.code, 'invalid_api_key');
      }
      const missing = await refusedWith(dial(g, { protocols: ['realtime'] }));
      assert.match(missing.body.error.message, /openai-insecure-api-key\.<key>/, 'a missing key says how a browser sends one');
      const raw = await rawExchange(g.url, upgradeRequest(`realtime, ${keyProtocol('sk-wrong-key-xyz')}`));
      assert.match(raw, /^HTTP\/1.1 401 /);
      assert.doesNotMatch(raw, /sec-websocket-accept/i, 'no handshake answer');
      assert.equal(r.upgrades.length, 0, 'nothing refused reached the replica');
      const text = await metricsText(g);
      assert.match(text, /^warmroute_realtime_refused_total\{reason="unauthorized"\} 6$/m);
      await keysNowhere(g, ['sk-wrong-key-xyz']);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('the Authorization or x-api-key header wins over the subprotocol, which is never passed on either way', async () => {
    const r = await startWsReplica();
    const g = await gateway(r);
    try {
      const a = await dial(g, { headers: { authorization: `Bearer ${SERVER_KEY}` }, protocols: ['realtime', keyProtocol('sk-wrong-key-xyz')] });
      const b = await dial(g, { headers: { 'x-api-key': SERVER_KEY }, protocols: [keyProtocol('sk-wrong-key-xyz'), 'realtime'] });
      const refused = await refusedWith(dial(g, { headers: { authorization: 'Bearer sk-wrong-key-xyz' }, protocols: ['realtime', keyProtocol(BROWSER_KEY)] }));
      assert.equal(refused.status, 401, 'a wrong header is not rescued by a right subprotocol');
      assert.deepEqual(offeredToReplica(r), ['realtime', 'realtime']);
      a.ws.close();
      b.ws.close();
      const lines = await closedAndLogged(g, 3);
      assert.deepEqual(lines.filter((l) => l.status === 101).map((l) => l.key), ['server', 'server']);
      await keysNowhere(g, [BROWSER_KEY, SERVER_KEY, 'sk-wrong-key-xyz']);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('with no client keys configured, a key subprotocol is still kept from the replica', async () => {
    const r = await startWsReplica();
    const g = await gateway(r, { auth: { apiKeys: [] } });
    try {
      const c = await dial(g, { protocols: [keyProtocol(BROWSER_KEY), 'realtime'] });
      assert.equal(c.ws.protocol, 'realtime');
      assert.deepEqual(offeredToReplica(r), ['realtime']);
      c.ws.close();
      await closedAndLogged(g, 1);
      await keysNowhere(g, [BROWSER_KEY]);
    } finally {
      await g.close();
      await r.close();
    }
  });
});

describe('realtime: the handshake\'s subprotocol', () => {
  it('is the replica\'s selection when it makes one', async () => {
    const r = await startWsReplica();
    r.choose = (offered) => (offered.has('openai-beta.realtime-v1') ? 'openai-beta.realtime-v1' : false);
    const g = await gateway(r);
    try {
      const c = await dial(g, { protocols: ['realtime', keyProtocol(BROWSER_KEY), 'openai-beta.realtime-v1'] });
      assert.equal(c.ws.protocol, 'openai-beta.realtime-v1');
      c.ws.close();
      const [line] = await closedAndLogged(g, 1);
      assert.equal(line.protocol, 'openai-beta.realtime-v1');
      assert.equal(line.protocolBy, 'replica');
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('a replica that selects none (as vLLM does): the client gets the first it offered that is not its key, and a warn line says so once', async () => {
    const r = await startWsReplica();
    r.choose = () => false;
    const g = await gateway(r);
    try {
      // The key offered first: the gateway's choice skips it.
      for (let i = 0; i < 2; i++) {
        const c = await dial(g, { protocols: [keyProtocol(BROWSER_KEY), 'realtime', 'openai-beta.realtime-v1'] });
        await waitFor('session.created', () => c.got.length === 1);
        assert.equal(c.ws.protocol, 'realtime');
        c.ws.close();
        await c.closed;
      }
      const lines = await closedAndLogged(g, 2);
      assert.deepEqual(lines.map((l) => [l.protocol, l.protocolBy]), [['realtime', 'gateway'], ['realtime', 'gateway']]);
      const warns = g.logs.filter((l) => l.level === 40 && /selected no subprotocol/.test(l.msg));
      assert.equal(warns.length, 1, 'once per replica');
      assert.equal(warns[0].replica, nameOf(r.url));

      // Only the key offered: there is nothing the gateway may select, so it selects nothing.
      const raw = await rawExchange(g.url, upgradeRequest(keyProtocol(SERVER_KEY)), 1_000);
      assert.match(raw, /^HTTP\/1.1 101 /);
      assert.doesNotMatch(raw.split('\r\n\r\n')[0], /sec-websocket-protocol/i);
      assert.deepEqual(offeredToReplica(r).at(-1), '', 'the replica was offered nothing');
      await keysNowhere(g, [BROWSER_KEY, SERVER_KEY]);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('a WebSocket after the browsers\' standard (undici\'s) opens with OpenAI\'s browser subprotocols through to a replica that selects none', async () => {
    const r = await startWsReplica();
    r.choose = () => false;
    const g = await gateway(r);
    try {
      // The WHATWG standard fails a handshake that offered subprotocols and got none back.
      for (const protocols of [['realtime', keyProtocol(BROWSER_KEY)], ['realtime', keyProtocol(SERVER_KEY), 'openai-beta.realtime-v1']]) {
        const ws = new StandardWebSocket(`${g.url.replace(/^http/, 'ws')}/v1/realtime?model=fixture-model&session_id=call-9`, protocols);
        const first = await new Promise<string>((resolve, reject) => {
          ws.addEventListener('message', (e) => resolve(String(e.data)), { once: true });
          ws.addEventListener('error', () => reject(new Error('the handshake failed')), { once: true });
        });
        assert.match(first, /^\{"type":"session.created"/);
        assert.equal(ws.protocol, 'realtime');
        const closed = new Promise((resolve) => ws.addEventListener('close', resolve, { once: true }));
        ws.close(1000);
        await closed;
      }
      assert.deepEqual(offeredToReplica(r), ['realtime', 'realtime, openai-beta.realtime-v1']);
      const lines = await closedAndLogged(g, 2);
      assert.deepEqual(lines.map((l) => l.key), ['browser', 'server']);
      await keysNowhere(g, [BROWSER_KEY, SERVER_KEY]);
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('a replica that selects a subprotocol it was not offered is replaced, and refused with 502 when none is left', async () => {
    const r = await startWsReplica();
    r.choose = () => 'not-offered';
    const g = await gateway(r);
    try {
      const refused = await refusedWith(dial(g, { protocols: ['realtime', keyProtocol(BROWSER_KEY)] }));
      assert.equal(refused.status, 502);
      assert.equal(refused.body.error.code, 'upstream_unavailable');
      assert.match(await metricsText(g), new RegExp(`^warmroute_realtime_replaced_total\\{replica="${nameOf(r.url)}",cause="protocol"\\} 1$`, 'm'));
    } finally {
      await g.close();
      await r.close();
    }
  });

  it('a Sec-WebSocket-Protocol that is not a list of distinct tokens is a 400 before anything reaches the replica', async () => {
    const r = await startWsReplica();
    const g = await gateway(r, { auth: { apiKeys: [] } });
    try {
      for (const header of ['realtime, realtime', 'real time', 'realtime,', 'realtime,,other', `${keyProtocol('a')}, ${keyProtocol('b')}`]) {
        const raw = await rawExchange(g.url, upgradeRequest(header));
        assert.match(raw, /^HTTP\/1.1 400 /, header);
        assert.match(raw, /"code":"invalid_request"/, header);
        assert.ok(!raw.includes('openai-insecure-api-key.a'), 'the refusal does not echo the header');
      }
      assert.equal(r.upgrades.length, 0);
      const c = await dial(g, { protocols: ['realtime'] });
      assert.equal(c.ws.protocol, 'realtime', 'the gateway still serves');
      c.ws.close();
      await closedAndLogged(g, 6);
    } finally {
      await g.close();
      await r.close();
    }
  });
});
