// helm/warmroute's optional NetworkPolicy and PrometheusRule, and its README's list of what it
// renders (helm.test.ts covers the workload, Services, Secrets and config).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { renderChart, type Values } from './helm-render.js';

const CHART = 'helm/warmroute';
const MULTI = parseYaml(readFileSync(`${CHART}/ci/multi-replica-redis-values.yaml`, 'utf8')) as Values;
const render = (...values: Values[]) => renderChart(CHART, { values }).objects;
const only = (objects: Values[], kind: string) => {
  const all = objects.filter((o) => o.kind === kind);
  assert.equal(all.length, 1, `one ${kind}`);
  return all[0];
};

describe('helm/warmroute NetworkPolicy', () => {
  const objects = render(MULTI);
  const policy = only(objects, 'NetworkPolicy');
  const deploy = only(objects, 'Deployment');
  const ports = deploy.spec.template.spec.containers[0].ports.map((p: Values) => p.name);
  const rule = (port: string) => policy.spec.ingress.find((r: Values) => r.ports.some((p: Values) => p.port === port));

  it('selects the gateway pods and admits ingress on their two named ports only', () => {
    assert.deepEqual(policy.spec.podSelector.matchLabels, deploy.spec.selector.matchLabels);
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    const named = policy.spec.ingress.flatMap((r: Values) => r.ports.map((p: Values) => p.port)).sort();
    assert.deepEqual(named, [...ports].sort(), 'the container ports, by name');
  });

  it('the admin port only from the gateways and networkPolicy.adminFrom; the client port from anyone by default', () => {
    const admin = rule('admin');
    assert.deepEqual(admin.from[0], { podSelector: { matchLabels: deploy.spec.selector.matchLabels } });
    assert.deepEqual(admin.from.slice(1), MULTI.networkPolicy.adminFrom);
    assert.equal(rule('http').from, undefined, 'no `from`: any source');
    const narrowed = render(MULTI, { networkPolicy: { clientFrom: [{ namespaceSelector: { matchLabels: { team: 'voice' } } }] } });
    assert.deepEqual(only(narrowed, 'NetworkPolicy').spec.ingress[0].from, [{ namespaceSelector: { matchLabels: { team: 'voice' } } }]);
  });

  it('is off by default', () => {
    assert.equal(render().filter((o) => o.kind === 'NetworkPolicy' || o.kind === 'PrometheusRule').length, 0);
  });
});

describe('helm/warmroute PrometheusRule', () => {
  const objects = render(MULTI);
  const rules = only(objects, 'PrometheusRule');
  const alerts = rules.spec.groups.flatMap((g: Values) => g.rules) as Values[];
  const adminService = objects.find((o) => o.kind === 'Service' && o.spec.ports[0].targetPort === 'admin')!;

  it('alerts on exactly the three series the README says to watch, each a metric the gateway exports', () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('## See where the time goes'), readme.indexOf('\n## ', readme.indexOf('## See where the time goes') + 5));
    const watched = new Set([...section.matchAll(/^\|[^|]+\| `([^`]+)` \|$/gm)].flatMap((m) => [...m[1].matchAll(/warmroute_\w+/g)].map((x) => x[0])));
    const alerted = new Set(alerts.flatMap((a) => [...String(a.expr).matchAll(/warmroute_\w+/g)].map((x) => x[0])));
    assert.ok(watched.size >= 3, [...watched].join(', '));
    assert.deepEqual([...alerted].sort(), [...watched].sort());
    const exported = new Set((createMetrics({ defaultMetrics: false }).registry.getMetricsAsArray() as unknown as { name: string }[]).map((m) => m.name));
    for (const series of alerted) assert.ok(exported.has(series.replace(/_bucket$/, '')), `${series} is exported`);
    assert.equal(alerts.length, 3);
  });

  it('scopes every query to the admin Service the ServiceMonitor scrapes, with the thresholds from values', () => {
    for (const a of alerts) {
      for (const m of String(a.expr).matchAll(/warmroute_\w+\{([^}]*)\}/g)) assert.equal(m[1], `job="${adminService.metadata.name}"`);
      assert.equal(a.for, '10m');
      assert.ok(a.annotations.summary && a.labels.severity);
    }
    assert.deepEqual(rules.metadata.labels.release, 'kube-prometheus-stack');
    const tuned = only(render(MULTI, { prometheusRule: { ttftP90Seconds: 0.4 } }), 'PrometheusRule');
    assert.match(tuned.spec.groups[0].rules[0].expr, /\) > 0\.4$/);
  });
});

describe("helm/warmroute's README", () => {
  it('lists every object the chart renders with every option on', () => {
    const readme = readFileSync(`${CHART}/README.md`, 'utf8');
    const rows = readme.split('\n').filter((l) => l.startsWith('| ')).map((l) => l.split('|')[1].trim());
    const objects = render(MULTI, { configSecret: '' });
    const fullname = only(objects, 'Deployment').metadata.name as string;
    for (const o of objects) {
      const suffix = String(o.metadata.name).slice(fullname.length);
      const row = rows.find((r) => r.startsWith(o.kind) && (suffix === '' ? !r.includes('`-') : r.includes(`\`${suffix}\``)));
      assert.ok(row, `a row for ${o.kind}${suffix ? ` (\`${suffix}\`)` : ''}`);
    }
  });
});
