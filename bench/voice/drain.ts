// The drain scenario of `npm run bench:voice -- --gateways N`: the voice workload (every session
// keyed, no tool turns) through one gateway; once 40% of its requests are done, the replica with
// the most pinned sessions is drained (POST /admin/replicas/:name/drain). Measured: the TTFT of
// each moved session's next turn, with warm handoff (its last prompt replayed to its next replica
// first) and without, against the turns of the sessions that did not move in the same window.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { percentiles } from '../lib/percentiles.js';
import { call } from '../lib/http.js';
import { startGateway, type Fleet } from './fleet.js';
import { runStrategy, type TurnRecord } from './run.js';
import { warmReplicas } from './warmup.js';
import { buildWorkload, type WorkloadOptions } from './workload.js';

export interface DrainRun {
  handoff: boolean;
  victim: string;
  /** ms after the run started at which the drain POST had been answered. */
  drainAtMs: number;
  moved: number;
  /** Moved sessions whose next turn failed (their TTFT is not in movedNext). */
  movedFailed: number;
  /** TTFT of each moved session's first turn after the drain began that another replica served. */
  movedNext: ReturnType<typeof percentiles>;
  /** Turns (not first turns) of sessions that never were on the victim, after the drain began. */
  unmoved: ReturnType<typeof percentiles>;
  /** Share of the moved turns' prompt found in the new replica's cache. */
  movedCachedShare: number | null;
  /** What GET /admin/replicas said of the drain at the end. */
  drain: Record<string, unknown> | null;
  errors: number;
}

interface AdminReplica { name: string; sessionsPinned: number; drain: Record<string, unknown> | null }

const replicasOf = async (adminUrl: string) => ((await (await call(`${adminUrl}/admin/replicas`)).json()) as { replicas: AdminReplica[] }).replicas;

async function oneRun(fleet: Fleet, workload: ReturnType<typeof buildWorkload>, handoff: boolean, o: { requestTimeoutMs: number; maxDurationMs: number }, progress: (l: string) => void): Promise<DrainRun> {
  const dir = mkdtempSync(join(tmpdir(), 'wr-drain-'));
  const config = join(dir, 'warmroute.yaml');
  writeFileSync(config, `handoff:\n  enabled: ${handoff}\n`);
  const gw = await startGateway(fleet.urls, 'affinity', ['--config', config]);
  const tag = `[drain, handoff ${handoff ? 'on' : 'off'}]`;
  let victim = '';
  /** ms after the run started (the records' clock) at which the drain POST was answered; -1 before. */
  let drainAtMs = -1;
  let drained: Promise<void> | null = null;
  let drainError: unknown = null;
  try {
    await fleet.reset();
    await warmReplicas(fleet.urls, workload, o.requestTimeoutMs);
    const run = await runStrategy({
      url: gw.url, strategy: handoff ? 'drain+handoff' : 'drain', workload,
      maxDurationMs: o.maxDurationMs, requestTimeoutMs: o.requestTimeoutMs,
      onProgress: (p) => {
        progress(`${tag} ${p.done}/${p.total} requests${drainAtMs >= 0 ? `, drained ${victim} at ${(drainAtMs / 1000).toFixed(1)} s` : ''}`);
        if (drained || p.done < 0.4 * p.total) return;
        // The run's start on this clock, so the drain's moment is on the records' clock.
        const runStart = performance.now() - p.elapsedMs;
        drained = (async () => {
          const reps = await replicasOf(gw.adminUrl);
          if (reps.length === 0) throw new Error('GET /admin/replicas lists no replica');
          victim = [...reps].sort((a, b) => b.sessionsPinned - a.sessionsPinned)[0].name;
          await call(`${gw.adminUrl}/admin/replicas/${encodeURIComponent(victim)}/drain`, { method: 'POST' });
          // Only now is the replica draining: a turn sent before this is not a moved one.
          drainAtMs = performance.now() - runStart;
        })().catch((e: unknown) => { drainError = e; });
      },
    });
    await drained;
    if (drainError !== null) throw new Error(`${tag} the drain of ${victim || 'the busiest replica'} failed, so the run measured no drain`, { cause: drainError });
    if (drainAtMs < 0 || drainAtMs > run.durationMs) throw new Error(`${tag} the drain did not happen while the run went on (${run.records.length} requests in ${(run.durationMs / 1000).toFixed(1)} s): nothing to measure`);
    const drain = (await replicasOf(gw.adminUrl)).find((r) => r.name === victim)?.drain ?? null;
    return { handoff, victim, drainAtMs, drain, ...measure(run.records, victim, drainAtMs) };
  } finally {
    await drained;
    await gw.stop();
  }
}

function measure(records: readonly TurnRecord[], victim: string, at: number) {
  const bySession = new Map<number, TurnRecord[]>();
  for (const r of records) bySession.set(r.session, [...(bySession.get(r.session) ?? []), r]);
  const movedNext: TurnRecord[] = [];
  const unmoved: TurnRecord[] = [];
  for (const rs of bySession.values()) {
    rs.sort((a, b) => a.sentMs - b.sentMs);
    const before = rs.filter((r) => r.sentMs < at && r.ok);
    const after = rs.filter((r) => r.sentMs >= at);
    const lastBefore = before[before.length - 1];
    if (lastBefore?.replica === victim) {
      // The first turn the drained replica did not serve: one it still served has not moved yet.
      const next = after.find((r) => r.replica !== victim);
      if (next) movedNext.push(next);
    } else if (!rs.some((r) => r.replica === victim)) {
      unmoved.push(...after.filter((r) => r.turn > 0 && r.ok));
    }
  }
  const ttft = (rs: TurnRecord[]) => percentiles(rs.filter((r) => r.ok && r.ttftMs !== null).map((r) => r.ttftMs!));
  const withUsage = movedNext.filter((r) => r.promptTokens);
  return {
    moved: movedNext.length,
    movedFailed: movedNext.filter((r) => !r.ok).length,
    movedNext: ttft(movedNext),
    unmoved: ttft(unmoved),
    movedCachedShare: withUsage.length ? withUsage.reduce((s, r) => s + (r.cachedTokens ?? 0), 0) / withUsage.reduce((s, r) => s + r.promptTokens!, 0) : null,
    errors: records.filter((r) => !r.ok).length,
  };
}

/** Both runs, handoff on then off, on the same fleet and the same (keyed, tool-free) workload. */
export async function runDrainScenario(fleet: Fleet, w: Partial<WorkloadOptions>, o: { requestTimeoutMs: number; maxDurationMs: number }, progress: (l: string) => void): Promise<DrainRun[]> {
  const workload = buildWorkload({ ...w, keylessShare: 0, toolTurnShare: 0 });
  const out: DrainRun[] = [];
  for (const handoff of [true, false]) out.push(await oneRun(fleet, workload, handoff, o, progress));
  return out;
}

const f = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(0));

/** Fewer moved sessions than this and a p50 of their next turns says little: no verdict. */
const MIN_MOVED = 5;

function drainVerdict(on: DrainRun | undefined): string {
  if (!on || on.moved === 0 || !on.unmoved.p50) return '**not measured**: no session moved, or no unmoved warm turn';
  const ratio = on.movedNext.p50! / on.unmoved.p50;
  const shown = `${Number.isFinite(ratio) ? ratio.toFixed(2) : '–'}×, ${on.movedFailed} of ${on.moved} next turns failed`;
  if (on.movedFailed > 0) return `**NOT met**: ${shown}`;
  if (on.moved < MIN_MOVED) return `**not judged**: ${shown} (needs ${MIN_MOVED} moved sessions)`;
  return `${ratio <= 1.5 ? '**met**' : '**NOT met**'}: ${shown}`;
}

export function drainTable(runs: readonly DrainRun[]): string {
  const lines = [
    '| drain | moved sessions | moved session\'s next turn TTFT p50 / p90 ms | unmoved warm turns p50 / p90 ms | next turn p50 ÷ unmoved p50 | moved turns\' prompt cached | handoffs (warmed / cold / failed) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of runs) {
    const d = r.drain as { warmed?: number; movedCold?: number; failed?: number } | null;
    lines.push(`| ${r.handoff ? '**with warm handoff**' : 'without handoff'} | ${r.moved} | ${f(r.movedNext.p50)} / ${f(r.movedNext.p90)} | ${f(r.unmoved.p50)} / ${f(r.unmoved.p90)} | ${r.unmoved.p50 && r.movedNext.p50 ? `${(r.movedNext.p50 / r.unmoved.p50).toFixed(2)}×` : '–'} | ${r.movedCachedShare === null ? '–' : `${(100 * r.movedCachedShare).toFixed(1)}%`} | ${d ? `${d.warmed} / ${d.movedCold} / ${d.failed}` : '–'} |`);
  }
  lines.push('', `Goal (drain with handoff: moved session's next turn p50 ≤ 1.5 × an unmoved warm turn, none of them failed): ${drainVerdict(runs.find((r) => r.handoff))}`);
  return lines.join('\n');
}
