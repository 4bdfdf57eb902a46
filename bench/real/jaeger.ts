// A Jaeger v2 all-in-one (built by install-jaeger.sh) on free loopback ports, traces in memory:
// its OTLP/HTTP receiver takes spans, its query API (/api/traces/{id}) serves them back, read with
// the probe's client and types (src/probe/jaeger.ts: one description of Jaeger's JSON).

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchTrace, type JaegerTrace } from '../../src/probe/jaeger.js';
import { freePort, startChild, type Child } from '../lib/procs.js';
import { CACHE_DIR } from './vllm-replica.js';

const HERE = new URL('.', import.meta.url).pathname;
export const JAEGER_VERSION = process.env.JAEGER_MODULE_VERSION ?? 'v1.76.0';
export const JAEGER_BIN = join(CACHE_DIR, `jaeger-${JAEGER_VERSION}`, 'jaeger');

export interface Jaeger {
  /** OTLP/HTTP base URL (POST /v1/traces). */
  otlpUrl: string;
  /** Query API base URL. */
  queryUrl: string;
  child: Child;
}

/** Builds Jaeger once (minutes: a Go build), then nothing. */
export function installJaeger(): void {
  if (existsSync(JAEGER_BIN)) return;
  const r = spawnSync('bash', [join(HERE, 'install-jaeger.sh')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`install-jaeger.sh exited with ${r.status}`);
}

function config(otlp: number, query: number, queryGrpc: number): string {
  // Only what the test reads: the OTLP/HTTP receiver, memory storage, the query API; no
  // self-metrics listener (its fixed port 8888 could be taken).
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:${query}
    grpc:
      endpoint: 127.0.0.1:${queryGrpc}
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${otlp}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`;
}

export async function startJaeger(): Promise<Jaeger> {
  installJaeger();
  const [otlp, query, queryGrpc] = [await freePort(), await freePort(), await freePort()];
  const dir = join(CACHE_DIR, 'jaeger-run');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `config-${process.pid}.yaml`);
  writeFileSync(file, config(otlp, query, queryGrpc));
  const child = await startChild(JAEGER_BIN, ['--config', file], null, { group: true });
  const queryUrl = `http://127.0.0.1:${query}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`${queryUrl}/api/services`, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.ok) break;
    } catch { /* not up yet */ }
    if (Date.now() > deadline) { await child.stop(); throw new Error('jaeger did not serve its query API within 60 s'); }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { otlpUrl: `http://127.0.0.1:${otlp}`, queryUrl, child };
}

/** The trace as Jaeger's query API serves it, or null while it does not know it. */
export const jaegerTrace = (j: Jaeger, traceId: string): Promise<JaegerTrace | null> => fetchTrace(j.queryUrl, traceId, 10_000);
