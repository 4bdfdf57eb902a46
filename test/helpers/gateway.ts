import { after, before } from 'node:test';
import { Writable } from 'node:stream';
import pino from 'pino';
import { request } from 'undici';
import { DEFAULT_MODEL } from '../../bench/sim/config.js';
import { resolveConfig } from '../../src/config/load.js';
import { buildGateway, type Gateway, type GatewayDeps } from '../../src/server.js';
import { loggerOptions } from '../../src/telemetry/logger.js';
import { startFixture, type FixtureUpstream } from './fixture-upstream.js';
import { waitFor } from './wait.js';

export interface TestGateway {
  gw: Gateway;
  url: string;
  adminUrl: string;
  /** Parsed log lines written so far. */
  logs: Record<string, any>[];
  close(): Promise<void>;
}

/** A real gateway on loopback port 0 in front of `upstreams` (or `raw.upstreams`), logging into memory. */
export async function startGateway(upstreams: string[], raw: Record<string, any> = {}, deps: Omit<GatewayDeps, 'log'> = {}): Promise<TestGateway> {
  const logs: Record<string, any>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line));
      cb();
    },
  });
  const config = resolveConfig({
    ...raw,
    upstreams: raw.upstreams ?? upstreams.map((url) => ({ url })),
    listen: { ...(raw.listen ?? {}), host: '127.0.0.1', port: 0 },
    admin: { ...(raw.admin ?? {}), host: '127.0.0.1', port: 0 },
    logging: { level: 'info', ...(raw.logging ?? {}) },
    health: { probeIntervalMs: 200, ...(raw.health ?? {}) },
    outlier: { baseEjectionMs: 300, ...(raw.outlier ?? {}) },
  });
  const log = pino(loggerOptions(config.logging.level), sink);
  const gw = buildGateway(config, { log, defaultMetrics: false, ...deps });
  const { url, adminUrl } = await gw.listen();
  return { gw, url, adminUrl, logs, close: () => gw.close() };
}

export function accessLines(logs: Record<string, any>[]): Record<string, any>[] {
  return logs.filter((l) => l.msg === 'request');
}

/**
 * The access lines once `pred` holds of them, or throws after `ms`. A line is written when the
 * gateway has finished the response, which can be a moment after the client has read all of it.
 */
export async function waitForAccess(g: Pick<TestGateway, 'logs'>, pred: (lines: Record<string, any>[]) => boolean, ms = 2_000): Promise<Record<string, any>[]> {
  let lines: Record<string, any>[] = [];
  await waitFor(`access lines such that ${String(pred)}`, () => pred((lines = accessLines(g.logs))), ms);
  return lines;
}

export interface SimTurn {
  status: number;
  /** x-warmroute-replica and x-warmroute-route as answered. */
  replica: string;
  route: string;
}

/**
 * One non-streaming chat turn to a gateway in front of simulated replicas (their default model),
 * under `session` as x-session-id when given: its status and where it went. The body is read and
 * dropped.
 */
export async function simTurn(g: Pick<TestGateway, 'url'>, messages: { role: string; content: string }[], opts: { session?: string | null; maxTokens?: number; stream?: boolean } = {}): Promise<SimTurn> {
  const res = await request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(opts.session ? { 'x-session-id': opts.session } : {}) },
    body: JSON.stringify({ model: DEFAULT_MODEL, max_tokens: opts.maxTokens ?? 2, messages, ...(opts.stream ? { stream: true } : {}) }),
  });
  await res.body.text();
  return { status: res.statusCode, replica: String(res.headers['x-warmroute-replica']), route: String(res.headers['x-warmroute-route']) };
}

export function chatBody(extra: Record<string, unknown> = {}, content = 'Hello there'): string {
  return JSON.stringify({
    model: 'fixture-model',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'system', content: 'You are a voice agent.' }, { role: 'user', content }],
    ...extra,
  });
}

/**
 * Inside a describe(): one fixture upstream and a gateway in front of it for the whole suite.
 * Read `env.a` / `env.g` inside tests (they are set by the before hook).
 */
export function fixtureAndGateway(raw: Record<string, any> = {}): { a: FixtureUpstream; g: TestGateway } {
  const env = {} as { a: FixtureUpstream; g: TestGateway };
  before(async () => {
    env.a = await startFixture('a');
    env.g = await startGateway([env.a.url], raw);
  });
  after(async () => {
    await env.g.close();
    await env.a.close();
  });
  return env;
}

/** A two-token chat request naming `model` (an adapter or a base model): its status, replica and JSON body. */
export async function chatModel(g: Pick<TestGateway, 'url'>, model: string, extra: Record<string, unknown> = {}): Promise<{ status: number; replica: string | string[] | undefined; json: any }> {
  const res = await request(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 2, messages: [{ role: 'user', content: 'hello' }], ...extra }),
  });
  return { status: res.statusCode, replica: res.headers['x-warmroute-replica'], json: (await res.body.json()) as any };
}
