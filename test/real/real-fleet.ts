// Shared pieces of the real-server suite (test/real/*.real.ts, `npm run test:real`): the vLLM fleet
// from `npm run fleet:vllm` (started here when it is not running), prompts long enough that a
// warm prefix shows, and small request helpers.

import { request } from 'undici';
import { ensureFleet } from '../../bench/real/fleet-vllm.js';
import type { FleetState } from '../../bench/real/fleet-vllm.js';

export const REPLICAS = Number(process.env.WARMROUTE_REAL_REPLICAS ?? 2);

let fleet: Promise<FleetState> | null = null;
/** The running fleet, started (≈1 min) if it is not. Left running afterwards, for the next run. */
export function realFleet(): Promise<FleetState> {
  fleet ??= ensureFleet(REPLICAS);
  return fleet;
}

const WORDS = 'the a of to and in is it you that he was for on are with as his they be at one have this from'.split(' ');

/** ~2.9 tokens per word with the tiny model's tokenizer: 1000 words ≈ 2,900 tokens (23 KV blocks). */
export function longText(seed: string, words = 1000): string {
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    h = Math.imul(h ^ (h >>> 15), 2246822519) >>> 0;
    h = (h + 0x9e3779b9) >>> 0;
    out.push(`${WORDS[h % WORDS.length]}${(h >>> 8) % 100}`);
  }
  return out.join(' ');
}

/** Unique per run, so one run's cached prefixes never warm the next run's "cold" requests. */
export const RUN = `${Date.now().toString(36)}-${process.pid}`;

export interface Json { status: number; headers: Record<string, string | string[] | undefined>; text: string; body: any }

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Json> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.body.text();
  let parsed: any = null;
  try { parsed = JSON.parse(text); } catch { /* a non-JSON body is compared as text */ }
  return { status: res.statusCode, headers: res.headers, text, body: parsed };
}

export async function getText(url: string): Promise<{ status: number; text: string }> {
  const res = await request(url);
  return { status: res.statusCode, text: await res.body.text() };
}

export interface SseChunk { id?: string; choices?: { delta?: { role?: string; content?: string }; finish_reason?: string | null; text?: string }[]; usage?: any; error?: unknown }

export function sseEvents(text: string): (SseChunk | '[DONE]')[] {
  return text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => (e === 'data: [DONE]' ? '[DONE]' : JSON.parse(e.slice(6)) as SseChunk));
}

export function contentOf(events: (SseChunk | '[DONE]')[]): string {
  return events.map((e) => (e === '[DONE]' ? '' : e.choices?.[0]?.delta?.content ?? '')).join('');
}

/** The replica a gateway answer names in x-warmroute-replica, as a fleet replica name. */
export function replicaOf(f: FleetState, headers: Json['headers']): string {
  const v = String(headers['x-warmroute-replica'] ?? '');
  return f.replicas.find((r) => v === r.name || v.endsWith(`:${new URL(r.url).port}`) || v === r.url)?.name ?? v;
}
