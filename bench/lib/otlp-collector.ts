// A loopback OTLP/HTTP trace receiver for tests and the demo: it keeps every export as received
// (content type, headers, bytes), can be told to refuse or hold them, decodes the http/json ones,
// and serves what it holds back the way Jaeger's query API does (GET /api/traces/{traceId}), so a
// reader of Jaeger (`warmroute probe --traces`) can be tested without a Jaeger.

import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JaegerSpan, JaegerTag, JaegerTrace } from '../../src/probe/jaeger.js';

export interface OtlpPost { type: string; headers: IncomingMessage['headers']; body: Buffer }

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
interface OtlpKeyValue { key: string; value: AnyValue }

/** One span of an http/json export, as OTLP's JSON encoding spells it. */
export interface OtlpJsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: OtlpKeyValue[];
  events?: { name: string; timeUnixNano: string | number; attributes?: OtlpKeyValue[] }[];
  links?: { traceId: string; spanId: string }[];
}

/** A received span with the service that sent it. */
export interface CollectedSpan extends OtlpJsonSpan { service: string }

export type { JaegerSpan, JaegerTag, JaegerTrace };

export interface OtlpCollector {
  /** Base URL: exporters post to `${url}/v1/traces` (any path is taken); the query API is `${url}/api/traces/{id}`. */
  url: string;
  posts: OtlpPost[];
  /** How the next exports are answered: this status, or held until release(). */
  answer: { status: number; hold: boolean };
  release(): void;
  /** Every span of the http/json exports so far. */
  spans(): CollectedSpan[];
  /** The trace in Jaeger's JSON, or null when no span of it has arrived. */
  trace(traceId: string): JaegerTrace | null;
  close(): Promise<void>;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const posts: OtlpPost[] = [];
  const held: (() => void)[] = [];
  // Each export decoded once, however often its spans are read (the demo reads hundreds of traces).
  const decoded = new WeakMap<OtlpPost, CollectedSpan[]>();
  const spansOf = (p: OtlpPost) => {
    let s = decoded.get(p);
    if (!s) decoded.set(p, (s = decodeJsonExport(p)));
    return s;
  };
  const c: OtlpCollector = {
    url: '', posts, answer: { status: 200, hold: false },
    release: () => { for (const f of held.splice(0)) f(); },
    spans: () => posts.flatMap(spansOf),
    trace: (id) => toJaeger(id, c.spans().filter((s) => s.traceId === id)),
    close: async () => { c.release(); server.closeAllConnections(); await new Promise<void>((r) => server.close(() => r())); },
  };
  const server: Server = createServer((req, res) => {
    const query = req.method === 'GET' ? /^\/api\/traces\/([0-9a-f]{32})$/.exec(req.url ?? '') : null;
    if (query) {
      const t = c.trace(query[1]);
      res.writeHead(t ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(t ? { data: [t] } : { data: null, errors: [{ code: 404, msg: 'trace not found' }] }));
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => {
      posts.push({ type: String(req.headers['content-type']), headers: req.headers, body: Buffer.concat(parts) });
      const send = () => { res.writeHead(c.answer.status, { 'content-type': 'application/json' }); res.end('{}'); };
      if (c.answer.hold) held.push(send); else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  c.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return c;
}

interface JsonExport { resourceSpans?: { resource?: { attributes?: OtlpKeyValue[] }; scopeSpans?: { spans?: OtlpJsonSpan[] }[] }[] }

function decodeJsonExport(p: OtlpPost): CollectedSpan[] {
  if (!p.type.includes('application/json')) return [];
  const doc = JSON.parse(p.body.toString()) as JsonExport;
  return (doc.resourceSpans ?? []).flatMap((rs) => {
    const service = String(valueOf(rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value) ?? 'unknown_service');
    return (rs.scopeSpans ?? []).flatMap((ss) => (ss.spans ?? []).map((s) => ({ ...s, service })));
  });
}

function valueOf(v: AnyValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  return v.boolValue;
}

const tags = (kvs: OtlpKeyValue[] | undefined): JaegerTag[] => (kvs ?? []).map((a) => {
  const value = valueOf(a.value);
  return { key: a.key, type: typeof value === 'number' ? (a.value.intValue !== undefined ? 'int64' : 'float64') : typeof value === 'boolean' ? 'bool' : 'string', value };
});
// The JS exporter writes nanoseconds as a decimal string; a number is taken too.
const micros = (nanos: string | number) => (typeof nanos === 'string' ? Number(BigInt(nanos) / 1000n) : Math.round(nanos / 1000));

function toJaeger(traceId: string, spans: CollectedSpan[]): JaegerTrace | null {
  if (spans.length === 0) return null;
  const processes: JaegerTrace['processes'] = {};
  const pid = (service: string) => {
    const found = Object.entries(processes).find(([, p]) => p.serviceName === service)?.[0];
    if (found) return found;
    const id = `p${Object.keys(processes).length + 1}`;
    processes[id] = { serviceName: service };
    return id;
  };
  return {
    traceID: traceId,
    processes,
    spans: spans.map((s) => ({
      traceID: s.traceId,
      spanID: s.spanId,
      operationName: s.name,
      references: [
        ...(s.parentSpanId ? [{ refType: 'CHILD_OF', traceID: s.traceId, spanID: s.parentSpanId }] : []),
        ...(s.links ?? []).map((l) => ({ refType: 'FOLLOWS_FROM', traceID: l.traceId, spanID: l.spanId })),
      ],
      startTime: micros(s.startTimeUnixNano),
      duration: micros(s.endTimeUnixNano) - micros(s.startTimeUnixNano),
      tags: tags(s.attributes),
      // Jaeger puts an event's name in an `event` field beside its attributes.
      logs: (s.events ?? []).map((e) => ({ timestamp: micros(e.timeUnixNano), fields: [{ key: 'event', type: 'string', value: e.name }, ...tags(e.attributes)] })),
      processID: pid(s.service),
    })),
  };
}
