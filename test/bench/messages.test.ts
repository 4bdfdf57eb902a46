// The Messages benchmark's pieces on a tiny run: both SDKs' conversations through a gateway in front
// of the cutting proxies, keyed turns held on their replica, and failures the proxy injects
// mid-stream each raised by the SDK (none silent), while requests that ask for no cut pass whole.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { APIS, inject, runArm } from '../../bench/messages/conversations.js';
import { startCutProxy, type CutProxy } from '../../bench/messages/cut-proxy.js';
import { startFleet } from '../../bench/sim/index.js';
import { buildWorkload } from '../../bench/voice/workload.js';
import { startGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';

const stops: (() => Promise<void>)[] = [];
after(async () => {
  for (const s of stops.reverse()) await s();
});

test('bench:messages on a tiny run: keyed turns pinned over both APIs, every injected failure raised', { timeout: 60_000 }, async () => {
  const fleet = await startFleet({ replicas: 2, ...FAST, outputTokens: { min: 12, max: 16 } });
  stops.push(() => fleet.close());
  const proxies: CutProxy[] = await Promise.all(fleet.urls.map((u) => startCutProxy(u)));
  stops.push(async () => { await Promise.all(proxies.map((p) => p.close())); });
  const g = await startGateway(proxies.map((p) => p.url));
  stops.push(() => g.close());
  for (let i = 0; i < 100 && (await fetch(`${g.url}/v1/models`)).status !== 200; i++) await new Promise((r) => setTimeout(r, 50));
  const target = { url: g.url, model: 'google/gemma-4-31B-it', maxTokens: 32 };
  const w = buildWorkload({ sessions: 2, turns: 2, groups: 1, systemTokens: [300, 300], toolTurnShare: 0, keylessShare: 0, bodyKeyShare: 0, thinkMs: [0, 0], startSpreadMs: 0 });
  for (const api of APIS) {
    const turns = await runArm(api, target, w, true);
    assert.equal(turns.length, 4);
    assert.deepEqual(turns.map((t) => t.route).sort(), ['pinned', 'pinned', 'placed', 'placed'], api);
    const x = await inject(api, target, w, 3, (id) => proxies.some((p) => p.cut.has(id)));
    assert.equal(x.raisedApiError, 3, `${api}: ${JSON.stringify(x)}`);
    assert.equal(x.silent, 0);
  }
  assert.equal(proxies.reduce((n, p) => n + p.cut.size, 0), 6, 'the proxies cut only the requests that asked');
});
