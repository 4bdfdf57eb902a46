/**
 * Without an admin token, /admin/* inspection answers only clients on this host, and changes
 * (drain, undrain, unpin) only when the admin listener itself is bound to loopback: behind a
 * service-mesh sidecar every client is a loopback peer. /metrics, /healthz and /readyz stay open.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { buildAdmin } from '../../src/admin/routes.js';
import { fixtureAndGateway } from '../helpers/gateway.js';

const MUTATIONS = (replica: string) => [
  ['POST', `/admin/replicas/${replica}/drain`],
  ['POST', `/admin/replicas/${replica}/undrain`],
  ['DELETE', '/admin/sessions/some-session'],
  ['GET', '/admin/replicas'],
  ['GET', '/%61dmin/replicas'],
] as const;

describe('the admin port without a token', () => {
  const env = fixtureAndGateway();
  /** The gateway's admin routes as they answer when admin.host is not a loopback address. */
  const openAdmin = () => buildAdmin({ registry: env.g.gw.registry, router: env.g.gw.router, metrics: env.g.gw.metrics, draining: () => false, loopbackListener: false, drains: { drain: () => true, undrain: () => true } });

  it('a client on another host gets a 403 naming what to set; X-Forwarded-For: 127.0.0.1 does not make it local', async () => {
    // No second host here: an admin app listening on every interface is driven with a remote
    // peer address, as its socket would report one (the check reads the socket, never a header).
    const app = openAdmin();
    const replica = env.g.gw.registry.replicas[0].name;
    for (const [method, url] of MUTATIONS(replica)) {
      for (const headers of [{}, { 'x-forwarded-for': '127.0.0.1', 'x-real-ip': '127.0.0.1', forwarded: 'for=127.0.0.1' }]) {
        const res = await app.inject({ method, url, remoteAddress: '203.0.113.7', headers });
        assert.equal(res.statusCode, 403, `${method} ${url} ${JSON.stringify(headers)}`);
        const body = res.json() as { error: { code: string; message: string } };
        assert.equal(body.error.code, 'admin_loopback_only');
        assert.match(body.error.message, /admin\.token/);
        assert.match(body.error.message, /WARMROUTE_ADMIN_TOKEN/);
      }
    }
    assert.equal(env.g.gw.registry.replicas[0].draining, false, 'the drain did not happen');
    for (const url of ['/metrics', '/healthz', '/readyz']) {
      const res = await app.inject({ method: 'GET', url, remoteAddress: '203.0.113.7' });
      assert.equal(res.statusCode, 200, url);
    }
  });

  it('listening beyond loopback: a loopback peer (a mesh sidecar, 127.0.0.6) may read but not change anything', async () => {
    const app = openAdmin();
    const replica = env.g.gw.registry.replicas[0].name;
    for (const [method, url] of MUTATIONS(replica)) {
      const res = await app.inject({ method, url, remoteAddress: '127.0.0.6' });
      if (method === 'GET') {
        assert.notEqual(res.statusCode, 403, `${method} ${url}: reading stays open to loopback peers`);
        continue;
      }
      assert.equal(res.statusCode, 403, `${method} ${url}`);
      const body = res.json() as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'admin_token_required');
      assert.match(body.error.message, /admin\.token/);
    }
    assert.equal(env.g.gw.registry.replicas[0].draining, false, 'the drain did not happen');
  });

  it('a loopback client of an admin listener bound to loopback can drain and undrain', async () => {
    const replica = env.g.gw.registry.replicas[0].name;
    const drain = await request(`${env.g.adminUrl}/admin/replicas/${replica}/drain`, { method: 'POST' });
    await drain.body.text();
    assert.equal(drain.statusCode, 202);
    assert.equal(env.g.gw.registry.replicas[0].draining, true);
    const undrain = await request(`${env.g.adminUrl}/admin/replicas/${replica}/undrain`, { method: 'POST' });
    await undrain.body.text();
    assert.equal(undrain.statusCode, 202);
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      const res = await request(`${env.g.adminUrl}${path}`);
      await res.body.text();
      assert.equal(res.statusCode, 200, path);
    }
  });

  it('loopback is the socket peer in 127.0.0.0/8 or ::1 (IPv4-mapped too), nothing else', async () => {
    const { isLoopback } = await import('../../src/admin/routes.js');
    for (const a of ['127.0.0.1', '127.0.0.2', '::1', '::ffff:127.0.0.1']) assert.ok(isLoopback(a), a);
    for (const a of ['10.0.0.1', '192.0.2.2', '::ffff:10.0.0.1', 'fd00::2', '::', '0.0.0.0', undefined]) assert.ok(!isLoopback(a), String(a));
    const { isLoopbackHost } = await import('../../src/admin/routes.js');
    for (const h of ['127.0.0.1', '::1', '[::1]', 'localhost']) assert.ok(isLoopbackHost(h), h);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'admin.local']) assert.ok(!isLoopbackHost(h), h);
  });
});
