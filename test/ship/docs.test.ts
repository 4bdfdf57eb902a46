import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { createMetrics } from '../../src/telemetry/metrics.js';

describe('the README and the reference pages', () => {
  const readme = readFileSync('README.md', 'utf8');
  const metricsPage = readFileSync('docs/metrics.md', 'utf8');

  it('docs/metrics.md names every metric the gateway exports, with its labels', () => {
    const metrics = createMetrics({ defaultMetrics: false });
    for (const m of metrics.registry.getMetricsAsArray() as unknown as { name: string; labelNames?: string[] }[]) {
      const row = metricsPage.split('\n').find((l) => l.startsWith(`| \`${m.name}\` |`));
      assert.ok(row, `${m.name} is missing from the table in docs/metrics.md`);
      for (const label of (m.labelNames ?? []).filter((l) => l !== 'le')) assert.ok(row.includes(label), `${m.name}: label ${label} not listed`);
    }
  });

  it('keep the first lines a newcomer runs true: npm ci && npm run demo, npm test', () => {
    const head = readme.split('\n').slice(0, 20).join('\n');
    assert.match(head, /npm ci && npm run demo/);
    assert.match(head, /npm test/);
    const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const s of ['demo', 'test', 'chaos', 'bench:voice', 'bench:overhead', 'bench:ab', 'bench:dashboard']) assert.ok(scripts[s], `npm run ${s} is named in the README`);
  });

  it('the README stays a five-minute read, and user pages carry no issue numbers or build hashes', () => {
    assert.ok(readme.split('\n').length <= 300, `README.md has ${readme.split('\n').length} lines`);
    const pages = ['README.md', 'CONTRIBUTING.md', 'helm/warmroute/README.md', 'docs/peers.md', 'docs/behaviour.md', 'docs/operations.md',
      'docs/configuration.md', 'docs/metrics.md', ...readdirSync('docs/benchmarks').map((f) => `docs/benchmarks/${f}`)];
    for (const page of pages) {
      const text = readFileSync(page, 'utf8');
      assert.doesNotMatch(text, /\bissue #?\d+|\b(?:build|commit|at) [0-9a-f]{7,40}\b/i, `${page} names an issue or a build`);
    }
  });
});
