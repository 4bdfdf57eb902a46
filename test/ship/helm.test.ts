// helm/warmroute rendered with no helm binary (helm-render.ts), for the default values and for
// ci/multi-replica-redis-values.yaml: the objects, ports, probes, drain timing, security context,
// that the generated config file is one the gateway accepts, and that no secret reaches a ConfigMap.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { isMap, isScalar, parseDocument, parse as parseYaml, visit, type Pair } from 'yaml';
import { resolveConfig } from '../../src/config/load.js';
import { instructionsOf, parseDockerfile } from './dockerfile.js';
import { renderChart, type Values } from './helm-render.js';

const CHART = 'helm/warmroute';
const MULTI = parseYaml(readFileSync(`${CHART}/ci/multi-replica-redis-values.yaml`, 'utf8')) as Values;
const REDIS_URL = MULTI.redis.url as string;
const defaults = resolveConfig({ upstreams: [{ url: 'http://x:1' }] });

const render = (...values: Values[]) => renderChart(CHART, { values });
const byKind = (objects: Values[], kind: string) => objects.filter((o) => o.kind === kind);
const oneOf = (objects: Values[], kind: string) => {
  const all = byKind(objects, kind);
  assert.equal(all.length, 1, `one ${kind}`);
  return all[0];
};
const container = (objects: Values[]) => oneOf(objects, 'Deployment').spec.template.spec.containers[0];
const configMaps = (objects: Values[]) => byKind(objects, 'ConfigMap');
/** The gateway's config file as the chart wrote it. */
const configFile = (objects: Values[]) => parseYaml(configMaps(objects).find((c) => c.data['warmroute.yaml'])!.data['warmroute.yaml']) as Values;

function assertWorkload(objects: Values[]) {
  const deploy = oneOf(objects, 'Deployment');
  const pod = deploy.spec.template;
  const c = container(objects);
  const selector = deploy.spec.selector.matchLabels;
  assert.deepEqual({ ...pod.metadata.labels, ...selector }, pod.metadata.labels, 'the pods carry the selector labels');

  // Ports: the gateway's defaults, each on its own Service.
  const ports = Object.fromEntries(c.ports.map((p: Values) => [p.name, p.containerPort]));
  assert.deepEqual(ports, { http: defaults.listen.port, admin: defaults.admin.port });
  const services = byKind(objects, 'Service');
  assert.equal(services.length, 2);
  const client = services.find((s) => s.spec.ports[0].targetPort === 'http')!;
  const admin = services.find((s) => s.spec.ports[0].targetPort === 'admin')!;
  assert.ok(client && admin && client.metadata.name !== admin.metadata.name, 'a client Service and a separate admin Service');
  assert.equal(client.spec.ports.length, 1, 'the admin port is not on the client Service');
  for (const s of services) assert.deepEqual(s.spec.selector, selector);

  // Probes on the admin port.
  assert.deepEqual(c.readinessProbe.httpGet, { path: '/readyz', port: 'admin' });
  assert.deepEqual(c.livenessProbe.httpGet, { path: '/healthz', port: 'admin' });
  assert.deepEqual(c.startupProbe.httpGet, { path: '/healthz', port: 'admin' });

  // preStop, then a grace period longer than the pause and the drain.
  const cfg = configFile(objects);
  const drainMs = cfg.timeouts?.drainMs ?? defaults.timeouts.drainMs;
  const pauseMs = Number(/setTimeout\(\(\) => \{\}, (\d+)\)/.exec(c.lifecycle.preStop.exec.command.join(' '))?.[1]);
  assert.ok(pauseMs > 0, 'a preStop pause');
  assert.ok(pod.spec.terminationGracePeriodSeconds * 1000 > pauseMs + drainMs, `grace ${pod.spec.terminationGracePeriodSeconds} s vs ${pauseMs} + ${drainMs} ms`);

  // Non-root (the image's own numeric user), read-only root filesystem, nothing to escalate.
  const uid = Number(instructionsOf(parseDockerfile('Dockerfile').final, 'USER')[0].args.split(':')[0]);
  assert.equal(pod.spec.securityContext.runAsNonRoot, true);
  assert.equal(pod.spec.securityContext.runAsUser, uid);
  assert.equal(c.securityContext.readOnlyRootFilesystem, true);
  assert.equal(c.securityContext.allowPrivilegeEscalation, false);
  assert.deepEqual(c.securityContext.capabilities.drop, ['ALL']);
  assert.equal(pod.spec.automountServiceAccountToken, false);
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
  assert.ok(pod.spec.topologySpreadConstraints.length >= 1);
  for (const t of pod.spec.topologySpreadConstraints) assert.deepEqual(t.labelSelector.matchLabels, selector);

  // The config file: mounted where --config reads it, accepted by the gateway's own schema.
  const mount = c.volumeMounts.find((m: Values) => m.name === 'config');
  assert.deepEqual(c.args, ['serve', '--config', `${mount.mountPath}/warmroute.yaml`]);
  assert.equal(pod.spec.volumes.find((v: Values) => v.name === 'config').configMap.name, configMaps(objects)[0].metadata.name);
  assert.match(pod.metadata.annotations['checksum/config'], /^[0-9a-f]{64}$/);
  const dnsFree = { ...cfg, upstreams: cfg.upstreams.map((u: Values) => ({ ...u, url: String(u.url).replace(/^dns:/, 'http:') })) };
  const resolved = resolveConfig(dnsFree); // throws, naming the path, on anything the gateway would refuse
  assert.equal(resolved.listen.port, defaults.listen.port);
  assert.equal(resolved.admin.port, defaults.admin.port);
  assert.equal(cfg.redis?.url, undefined, 'no Redis URL in the config file');
  return { deploy, c, cfg, client, admin };
}

/** No ConfigMap holds the Redis URL, its password, or any redis:// URL, in clear or in base64. */
function assertNoSecretInConfigMaps(objects: Values[], secrets: string[]) {
  for (const cm of configMaps(objects)) {
    const text = JSON.stringify(cm);
    assert.doesNotMatch(text, /rediss?:\/\//, `${cm.metadata.name} holds a Redis URL`);
    for (const s of secrets) {
      assert.ok(!text.includes(s), `${cm.metadata.name} holds a secret`);
      assert.ok(!text.includes(Buffer.from(s).toString('base64')), `${cm.metadata.name} holds a secret in base64`);
    }
  }
}

describe('helm/warmroute, default values', () => {
  const { objects, files } = render();

  it('renders a Deployment, a client and an admin Service, the config ConfigMap and a PDB, and nothing optional', () => {
    assert.deepEqual(objects.map((o) => o.kind).sort(), ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Secret', 'Service', 'Service']);
    for (const o of objects) assert.ok(o.apiVersion && o.metadata.name && o.metadata.labels['app.kubernetes.io/instance'], `${o.kind} named and labelled`);
    const deploy = oneOf(objects, 'Deployment');
    assert.equal(deploy.spec.replicas, 2);
    assert.deepEqual(oneOf(objects, 'PodDisruptionBudget').spec.selector.matchLabels, deploy.spec.selector.matchLabels);
    assert.deepEqual(container(objects).env.map((e: Values) => e.name), ['WARMROUTE_ADMIN_TOKEN', 'WARMROUTE_SESSION_TAG_SECRET'], 'no Redis: no WARMROUTE_REDIS');
    assert.match(files['templates/dashboard-configmap.yaml'], /^\s*$/);
  });

  it('probes, ports, drain timing, security context and a config file the gateway accepts', () => {
    const { c, cfg, deploy } = assertWorkload(objects);
    assert.deepEqual(cfg.upstreams.map((u: Values) => u.url), ['http://vllm-0.vllm-headless:8000', 'http://vllm-1.vllm-headless:8000']);
    // The image tag follows the chart's appVersion, which is warmroute's version.
    const chart = parseYaml(readFileSync(`${CHART}/Chart.yaml`, 'utf8'));
    assert.equal(chart.appVersion, JSON.parse(readFileSync('package.json', 'utf8')).version);
    assert.equal(c.image, `warmroute:${chart.appVersion}`);
    // A config change rolls the pods.
    const checksum = createHash('sha256').update(files['templates/configmap.yaml']).digest('hex');
    assert.equal(deploy.spec.template.metadata.annotations['checksum/config'], checksum);
  });

  it('values.yaml: the drain time shown is the gateway\'s default, and every key is documented', () => {
    const values = parseYaml(readFileSync(`${CHART}/values.yaml`, 'utf8'));
    assert.equal(values.config.timeouts.drainMs, defaults.timeouts.drainMs);
    assert.deepEqual(undocumentedValues(readFileSync(`${CHART}/values.yaml`, 'utf8')), []);
  });
});

describe('helm/warmroute, several gateways with Redis (ci/multi-replica-redis-values.yaml)', () => {
  const { objects } = render(MULTI);

  it('renders the HPA, PDB, ServiceMonitor, PrometheusRule, NetworkPolicy, dashboard ConfigMap and the Redis Secret', () => {
    assert.deepEqual(objects.map((o) => o.kind).sort(), [
      'ConfigMap', 'ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'PodDisruptionBudget', 'PrometheusRule', 'Secret', 'Secret', 'Service', 'Service', 'ServiceMonitor',
    ]);
    const deploy = oneOf(objects, 'Deployment');
    assert.equal(deploy.spec.replicas, undefined, 'the HPA owns the replica count');
    const hpa = oneOf(objects, 'HorizontalPodAutoscaler');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deploy.metadata.name });
    assert.equal(hpa.spec.minReplicas, MULTI.autoscaling.minReplicas);
  });

  it('probes, ports, drain timing and security context hold here too; upstreams are the headless Service by DNS', () => {
    const { cfg, deploy } = assertWorkload(objects);
    assert.deepEqual(cfg.upstreams, [{ url: 'dns://vllm-headless.llm.svc.cluster.local:8000' }]);
    assert.equal(cfg.timeouts.drainMs, 60_000);
    assert.equal(cfg.redis.keyPrefix, 'wr:', 'non-secret Redis settings stay in the file');
    assert.equal(deploy.spec.template.spec.terminationGracePeriodSeconds, 75);
  });

  it('the Redis URL reaches the pod only through a Secret, and no ConfigMap holds it', () => {
    const secret = byKind(objects, 'Secret').find((s) => s.data.url !== undefined)!;
    assert.equal(Buffer.from(secret.data.url, 'base64').toString(), REDIS_URL);
    const env = container(objects).env.filter((e: Values) => e.name === 'WARMROUTE_REDIS');
    assert.deepEqual(env, [{ name: 'WARMROUTE_REDIS', valueFrom: { secretKeyRef: { name: secret.metadata.name, key: 'url' } } }]);
    assertNoSecretInConfigMaps(objects, [REDIS_URL, 's3cret-pw']);
  });

  it('an existing Secret is used as it is: the chart creates none', () => {
    const { objects: own } = render(MULTI, { redis: { existingSecret: 'platform-redis', existingSecretKey: 'uri', url: '' } });
    assert.equal(byKind(own, 'Secret').filter((s) => s.data.url !== undefined || s.data.uri !== undefined).length, 0);
    assert.deepEqual(container(own).env.find((e: Values) => e.name === 'WARMROUTE_REDIS').valueFrom.secretKeyRef, { name: 'platform-redis', key: 'uri' });
    assertNoSecretInConfigMaps(own, [REDIS_URL]);
  });

  it('the ServiceMonitor scrapes the admin Service; the dashboard ConfigMap carries the Grafana label and deploy/grafana/warmroute.json', () => {
    const sm = oneOf(objects, 'ServiceMonitor');
    const admin = byKind(objects, 'Service').find((s) => s.spec.ports[0].name === 'admin')!;
    for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) assert.equal(admin.metadata.labels[k], v);
    const client = byKind(objects, 'Service').find((s) => s.spec.ports[0].name === 'http')!;
    assert.ok(Object.entries(sm.spec.selector.matchLabels).some(([k, v]) => client.metadata.labels[k] !== v), 'the client Service is not scraped');
    assert.deepEqual(sm.spec.endpoints, [{ port: 'admin', path: '/metrics', interval: '15s' }]);
    assert.equal(sm.metadata.labels.release, 'kube-prometheus-stack');
    const dash = configMaps(objects).find((c) => c.data['warmroute.json'] !== undefined)!;
    assert.equal(dash.metadata.labels.grafana_dashboard, '1');
    assert.deepEqual(JSON.parse(dash.data['warmroute.json']), JSON.parse(readFileSync('deploy/grafana/warmroute.json', 'utf8')));
  });
});

describe('helm/warmroute: the admin token and the session-tag key (issue 17 #7, #13)', () => {
  it('the chart creates a Secret with both, drawn at random (kept on upgrades), and the pods read them from it', () => {
    const one = render();
    const two = render();
    const secretOf = (r: { objects: Values[] }) => oneOf(r.objects, 'Secret');
    const s = secretOf(one);
    assert.equal(s.metadata.annotations['helm.sh/resource-policy'], 'keep');
    const token = Buffer.from(s.data.adminToken, 'base64').toString();
    const tagKey = Buffer.from(s.data.sessionTagSecret, 'base64').toString();
    // As the gateway's schema accepts them.
    const cfg = resolveConfig({ upstreams: [{ url: 'http://x:1' }], admin: { token }, logging: { sessionTagSecret: tagKey } });
    assert.equal(cfg.admin.token, token);
    assert.ok(token.length >= 32 && tagKey.length >= 32);
    assert.notEqual(token, Buffer.from(secretOf(two).data.adminToken, 'base64').toString(), 'random per install');
    assert.notEqual(token, tagKey);
    const env = container(one.objects).env;
    assert.deepEqual(env.slice(0, 2), [
      { name: 'WARMROUTE_ADMIN_TOKEN', valueFrom: { secretKeyRef: { name: s.metadata.name, key: 'adminToken' } } },
      { name: 'WARMROUTE_SESSION_TAG_SECRET', valueFrom: { secretKeyRef: { name: s.metadata.name, key: 'sessionTagSecret' } } },
    ]);
    assertNoSecretInConfigMaps(one.objects, [token, tagKey]);
    // An upgrade reads the Secret back (lookup) instead of drawing new values.
    assert.match(readFileSync(`${CHART}/templates/secret-gateway.yaml`, 'utf8'), /lookup "v1" "Secret" \.Release\.Namespace \$name/);
  });

  it('an existing Secret is used as it is: the chart creates none', () => {
    const { objects } = render({ secrets: { existingSecret: 'platform-warmroute' } });
    assert.equal(byKind(objects, 'Secret').length, 0);
    for (const e of container(objects).env) assert.equal(e.valueFrom.secretKeyRef.name, 'platform-warmroute');
  });
});

describe('helm/warmroute refuses what would leak or cut streams', () => {
  it('a replica apiKey in the static list (it would be in a ConfigMap)', () => {
    assert.throws(() => render({ upstreams: { static: [{ url: 'http://v:8000', apiKey: 'sk-live-123' }] } }), /apiKey would be written to a ConfigMap/);
  });
  it('a Redis URL in config (it would be in a ConfigMap)', () => {
    assert.throws(() => render({ config: { redis: { url: 'redis://:pw@r:6379' } } }), /config\.redis\.url would be written to a ConfigMap/);
  });
  it('a grace period that does not outlast the preStop pause and the drain', () => {
    assert.throws(() => render({ terminationGracePeriodSeconds: 35 }), /terminationGracePeriodSeconds \(35\) must be longer than preStopSleepSeconds \(5\) \+ config\.timeouts\.drainMs \(30 s\)/);
  });
  it('ports set in config instead of the Services', () => {
    assert.throws(() => render({ config: { listen: { port: 1 } } }), /config\.listen is set by the chart/);
  });
  it('replicas whose keys are secret: the whole config file from a Secret, no ConfigMap', () => {
    const { objects } = render({ configSecret: 'warmroute-config' });
    assert.equal(configMaps(objects).length, 0);
    assert.deepEqual(oneOf(objects, 'Deployment').spec.template.spec.volumes[0], { name: 'config', secret: { secretName: 'warmroute-config' } });
  });
});

// Kubernetes objects passed through toYaml are documented where they start, not key by key.
const PASS_THROUGH = new Set([
  'upstreams.static', 'config', 'resources', 'podSecurityContext', 'securityContext', 'topologySpreadConstraints',
  'probes.startup', 'probes.liveness', 'probes.readiness', 'service.annotations', 'serviceMonitor.labels',
  'dashboard.labels', 'dashboard.annotations', 'podAnnotations', 'extraEnv', 'imagePullSecrets', 'nodeSelector', 'tolerations', 'affinity',
]);

/** Keys of values.yaml with no comment of their own, outside the pass-through objects. */
function undocumentedValues(text: string): string[] {
  const doc = parseDocument(text);
  const missing: string[] = [];
  visit(doc, {
    Pair(_key, pair: Pair, path) {
      const keys = path.filter((n): n is Pair => (n as Pair).key !== undefined && isScalar((n as Pair).key)).map((p) => String((p.key as { value: unknown }).value));
      if (!isScalar(pair.key)) return;
      const parent = keys.join('.');
      if ([...PASS_THROUGH].some((p) => parent === p || parent.startsWith(`${p}.`))) return;
      if (path.some((n) => !isMap(n) && Array.isArray((n as { items?: unknown }).items) && !isMap(n))) return;
      const documented = pair.key.commentBefore || (pair.value as { comment?: string } | null)?.comment || (isScalar(pair.value) && pair.value.comment);
      // A comment above the first key of a map belongs to the map (or to the document) in the YAML tree.
      const map = path[path.length - 1];
      const first = isMap(map) && map.items[0] === pair && (map.commentBefore || (map === doc.contents && doc.commentBefore));
      if (!documented && !first) missing.push([...keys, String(pair.key.value)].join('.'));
    },
  });
  return missing;
}
