import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveConfig } from '../../../src/config/load.js';
import { kvEndpointsOf } from '../../../src/fleet/kv-events/streams.js';

test('KV event endpoints: per static upstream, or by the port convention for dns:// addresses', () => {
  const c = resolveConfig({
    upstreams: [
      { url: 'http://10.0.0.5:8000', name: 'a', kvEvents: { endpoint: 'tcp://10.0.0.5:5557', replayEndpoint: 'tcp://10.0.0.5:5558', topic: 'kv@a' } },
      { url: 'http://10.0.0.6:8000', name: 'b' },
      { url: 'dns://vllm.ns.svc:8000', name: 'pods' },
    ],
    kvEvents: { port: 5557, replayPort: 5558, topic: 'kv' },
  });
  assert.deepEqual(kvEndpointsOf({ url: 'http://10.0.0.5:8000', source: { upstream: 'a', kind: 'static' } }, c), { endpoint: 'tcp://10.0.0.5:5557', replayEndpoint: 'tcp://10.0.0.5:5558', topic: 'kv@a', dataParallelSize: 1 });
  assert.equal(kvEndpointsOf({ url: 'http://10.0.0.6:8000', source: { upstream: 'b', kind: 'static' } }, c), null);
  assert.deepEqual(kvEndpointsOf({ url: 'http://10.1.2.3:8000', source: { upstream: 'pods', kind: 'dns' } }, c), { endpoint: 'tcp://10.1.2.3:5557', replayEndpoint: 'tcp://10.1.2.3:5558', topic: 'kv', dataParallelSize: 1 });
  assert.deepEqual(kvEndpointsOf({ url: 'http://[fd00::7]:8000', source: { upstream: 'pods', kind: 'dns' } }, c)?.endpoint, 'tcp://[fd00::7]:5557');
  const off = resolveConfig({ upstreams: [{ url: 'dns://vllm.ns.svc:8000', name: 'pods' }] });
  assert.equal(kvEndpointsOf({ url: 'http://10.1.2.3:8000', source: { upstream: 'pods', kind: 'dns' } }, off), null, 'no port: no KV events for dns upstreams');
  assert.equal(off.kvEvents.medium, 'GPU');
  assert.throws(() => resolveConfig({ upstreams: [{ url: 'http://h:1', kvEvents: { endpoint: 'http://h:5557' } }] }), /endpoint/);
  const dp = resolveConfig({
    upstreams: [{ url: 'http://h:1', name: 'x', kvEvents: { endpoint: 'tcp://h:5557', dataParallelSize: 4 } }, { url: 'dns://vllm.ns.svc:8000', name: 'pods' }],
    kvEvents: { port: 5557, dataParallelSize: 2 },
  });
  assert.equal(kvEndpointsOf({ url: 'http://h:1', source: { upstream: 'x', kind: 'static' } }, dp)?.dataParallelSize, 4, 'per upstream');
  assert.equal(kvEndpointsOf({ url: 'http://10.1.2.3:8000', source: { upstream: 'pods', kind: 'dns' } }, dp)?.dataParallelSize, 2, 'the top-level default');
});
