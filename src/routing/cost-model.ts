import type { RoutingOptions } from '../config/schema.js';
import type { ReplicaCost } from './types.js';

/**
 * Online estimate of each replica's TTFT as a linear function of what routing can see:
 *
 *   ttft ≈ fixed + prefill × uncached tokens + queue × waiting requests + perRunning × running
 *
 * fitted by recursive least squares with exponential forgetting, one model per replica (GPUs,
 * models and tensor-parallel sizes differ). Why RLS and not an EWMA per coefficient: TTFT is one
 * number explained by several causes at once, and only a joint fit can tell a slow prefill from a
 * long queue. Three guards keep a live fit sane:
 *   - the covariance starts at the prior's confidence and is never allowed above it, so a feature
 *     that stays constant (waiting = 0 for hours) cannot wind up and explode on its first change;
 *   - a residual is clipped to ±(100 ms + the estimate), so one preempted request cannot teach
 *     the model that prefill costs a second per token;
 *   - the coefficients are clamped to plausible ranges when used.
 * Uncached tokens are in the replica's own tokens (vLLM's usage), the gateway's estimates being
 * rescaled by `tokenScale`, learned from usage chunks that report both.
 */

export interface CostModel {
  /** Estimated TTFT in ms. `uncachedTokens` in the gateway's estimate units (rescaled here). */
  estimate(replica: string, uncachedTokens: number, waiting: number, running: number): number;
  /** One observed upstream TTFT; `uncachedTokens` already in the replica's tokens when `exact`. */
  observe(replica: string, uncachedTokens: number, exact: boolean, waiting: number, running: number, ttftMs: number): void;
  /** A usage chunk reported the prompt's real token count: refine the estimate's scale. */
  observeTokens(estimated: number, reported: number): void;
  tokenScale(): number;
  params(replica: string): ReplicaCost;
  /** A replica that left the fleet: its fit goes (a restart keeps it: same hardware, same costs). */
  remove(replica: string): void;
  snapshot(): Map<string, ReplicaCost>;
}

const N = 4;
/** Prefill is fitted per 1,000 tokens so all four coefficients have similar magnitudes. */
const KTOK = 1000;
/** Prior standard deviations, in units of the measurement noise (~50 ms): how far the first observations may pull. */
const PRIOR_SD = [0.7, 2, 1, 0.2];
/**
 * The token scale is a running mean of its first 1 / SCALE_ALPHA (20) reports, then an EWMA of
 * weight SCALE_ALPHA: one update, the weight max(SCALE_ALPHA, 1 / reports). An EWMA alone, started from 1, needs ~45 reports to learn a tokenizer that makes 3×
 * the estimate's tokens (a small vocabulary), and placement under KV pressure decides a fleet's first
 * sessions from it: judged with a scale of 1, a fleet that is full looks as if it had room.
 */
const SCALE_ALPHA = 0.05;

interface Fit {
  readonly theta: Float64Array;
  readonly p: Float64Array; // N×N, row-major
  samples: number;
}

export function createCostModel(prior: RoutingOptions['prior'], forgetting: number): CostModel {
  const fits = new Map<string, Fit>();
  const theta0 = [prior.fixedMs, prior.prefillMsPerToken * KTOK, prior.queueMsPerWaiting, prior.msPerRunning];
  const pMax = PRIOR_SD.map((sd) => sd * sd);
  let scale = 1;
  let scaleSamples = 0;
  const x = new Float64Array(N);
  const px = new Float64Array(N);

  function fitOf(replica: string): Fit {
    let f = fits.get(replica);
    if (f === undefined) {
      const p = new Float64Array(N * N);
      for (let i = 0; i < N; i++) p[i * N + i] = pMax[i];
      f = { theta: Float64Array.from(theta0), p, samples: 0 };
      fits.set(replica, f);
    }
    return f;
  }

  /** Coefficients as used: clamped to ranges no real replica leaves. */
  function coefficients(f: Fit | undefined): [number, number, number, number] {
    const t = f?.theta ?? theta0;
    return [
      clamp(t[0], 0, 10_000),
      clamp(t[1], theta0[1] / 20, theta0[1] * 20) / KTOK,
      clamp(t[2], 0, 10_000),
      clamp(t[3], 0, 1_000),
    ];
  }

  function predict(f: Fit | undefined, tokens: number, waiting: number, running: number): number {
    const [a, b, q, r] = coefficients(f);
    return a + b * tokens + q * waiting + r * running;
  }

  return {
    estimate(replica, uncachedTokens, waiting, running) {
      return predict(fits.get(replica), Math.max(0, uncachedTokens) * scale, waiting, running);
    },

    observe(replica, uncachedTokens, exact, waiting, running, ttftMs) {
      if (!(ttftMs >= 0) || !Number.isFinite(ttftMs)) return;
      const f = fitOf(replica);
      const tokens = Math.max(0, uncachedTokens) * (exact ? 1 : scale);
      x[0] = 1;
      x[1] = tokens / KTOK;
      x[2] = waiting;
      x[3] = running;
      const { theta, p } = f;
      let denom = forgetting;
      let yhat = 0;
      for (let i = 0; i < N; i++) {
        let s = 0;
        for (let j = 0; j < N; j++) s += p[i * N + j] * x[j];
        px[i] = s;
        denom += x[i] * s;
        yhat += theta[i] * x[i];
      }
      const bound = 100 + Math.abs(yhat);
      const err = clamp(ttftMs - yhat, -bound, bound);
      for (let i = 0; i < N; i++) theta[i] += (px[i] / denom) * err;
      for (let i = 0; i < N; i++) {
        for (let j = 0; j < N; j++) p[i * N + j] = (p[i * N + j] - (px[i] * px[j]) / denom) / forgetting;
      }
      // Never more uncertain than the prior: rescale row and column i together (keeps P symmetric PSD).
      for (let i = 0; i < N; i++) {
        const d = p[i * N + i];
        if (d <= pMax[i]) continue;
        const k = Math.sqrt(pMax[i] / d);
        for (let j = 0; j < N; j++) {
          p[i * N + j] *= k;
          p[j * N + i] *= k;
        }
      }
      f.samples++;
    },

    observeTokens(estimated, reported) {
      if (!(estimated > 0 && reported > 0)) return;
      const ratio = reported / estimated;
      if (ratio < 0.1 || ratio > 10) return; // a different tokenizer world, or a broken report
      scaleSamples++;
      const alpha = Math.max(SCALE_ALPHA, 1 / scaleSamples);
      scale = clamp(scale + alpha * (ratio - scale), 0.25, 4);
    },

    tokenScale: () => scale,

    remove: (replica) => void fits.delete(replica),

    params(replica) {
      const f = fits.get(replica);
      const [fixedMs, prefillMsPerToken, queueMsPerWaiting, msPerRunning] = coefficients(f);
      return { fixedMs, prefillMsPerToken, queueMsPerWaiting, msPerRunning, samples: f?.samples ?? 0 };
    },

    snapshot() {
      const out = new Map<string, ReplicaCost>();
      for (const name of fits.keys()) out.set(name, this.params(name));
      return out;
    },

  };
}

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}
