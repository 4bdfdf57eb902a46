/** Issue 17 #14: every series whose label values are known is exported from start, at 0. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { fixtureAndGateway } from '../helpers/gateway.js';

describe('a fresh gateway exports its known series at 0 (issue 17 #14)', () => {
  const env = fixtureAndGateway();

  it('ejections, shed, store errors and the other counters with known labels, before any event', async () => {
    const res = await request(`${env.g.adminUrl}/metrics`);
    const text = await res.body.text();
    const replica = env.g.gw.registry.replicas[0].name;
    const want = [
      ...['5xx', 'connect', 'timeout'].map((cause) => `warmroute_replica_ejections_total{replica="${replica}",cause="${cause}"} 0`),
      ...['5xx', 'connect', 'timeout'].map((cause) => `warmroute_replica_ejections_skipped_total{cause="${cause}"} 0`),
      ...['global_queue_full', 'global_queue_timeout', 'replica_queue_full', 'replica_queue_timeout', 'key_limit'].map((r) => `warmroute_shed_total{reason="${r}"} 0`),
      ...['sessions', 'responses'].flatMap((store) => ['connect', 'pin', 'lookup'].map((op) => `warmroute_store_errors_total{store="${store}",op="${op}"} 0`)),
      `warmroute_store_events_total{store="sessions",event="published"} 0`,
      ...['missing', 'invalid'].map((r) => `warmroute_auth_failures_total{reason="${r}"} 0`),
      ...['tools', 'system', 'history'].map((w) => `warmroute_prefix_drift_total{where="${w}"} 0`),
      ...['resumed', 'failed'].map((o) => `warmroute_stream_resumes_total{outcome="${o}"} 0`),
      `warmroute_client_aborts_total{replica="${replica}"} 0`,
      ...['restart', 'long_outage'].map((c) => `warmroute_replica_warm_state_forgotten_total{replica="${replica}",cause="${c}"} 0`),
      ...['models', 'metrics'].map((w) => `warmroute_replica_scrape_errors_total{replica="${replica}",what="${w}"} 0`),
      `warmroute_prompt_tokens_total{replica="${replica}"} 0`,
      `warmroute_cached_tokens_total{replica="${replica}"} 0`,
    ];
    const missing = want.filter((line) => !text.split('\n').includes(line));
    assert.deepEqual(missing, [], `series absent on a fresh gateway:\n${missing.join('\n')}`);
  });
});
