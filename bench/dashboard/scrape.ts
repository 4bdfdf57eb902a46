// What Prometheus would have stored: every target's /metrics, every few seconds, in memory, each
// sample labelled with its target's job and instance.

import type { Labels, Sample, Scrape } from './promql.js';

/**
 * The Prometheus text format, samples only (comments and TYPE/HELP lines skipped): `name{l="v",...}
 * value [timestamp]`, label values with \\, \" and \n escapes, NaN and ±Inf values.
 */
export function parsePromText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!name) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = { __name__: name[0] };
    let i = name[0].length;
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (line[i] === '}') { i++; break; }
        const l = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
        if (!l) throw new Error(`unparsable labels: ${line}`);
        i += l[0].length;
        let v = '';
        for (; i < line.length && line[i] !== '"'; i++) {
          if (line[i] === '\\') { i++; v += line[i] === 'n' ? '\n' : line[i]; } else v += line[i];
        }
        i++;
        labels[l[1]] = v;
      }
    }
    const value = line.slice(i).trim().split(/\s+/)[0];
    out.push({ labels, value: value === '+Inf' ? Infinity : value === '-Inf' ? -Infinity : Number(value) });
  }
  return out;
}

export interface Target {
  url: string;
  labels: Labels;
}

/** A target as Prometheus names it: job as configured, instance = host:port of its /metrics. */
/** `instance`: the target's name, as a relabelling would set it (default host:port, as Prometheus does). */
export const target = (job: string, metricsUrl: string, instance = new URL(metricsUrl).host): Target => ({ url: metricsUrl, labels: { job, instance } });

export interface Scraper {
  readonly scrapes: Scrape[];
  stop(): Promise<void>;
}

/**
 * Scrapes every target every `everyMs` until stopped. A round's samples all carry the round's
 * start time, as Prometheus stamps a scrape with its start; a target that fails or times out is
 * recorded as a failed scrape (its series go stale), as a down target would be.
 */
export function startScraper(targets: readonly Target[], everyMs: number): Scraper {
  const scrapes: Scrape[] = [];
  let stopped = false;
  let wake = () => {};
  const one = async (tg: Target, t: number): Promise<Scrape> => {
    let text: string;
    try {
      const res = await fetch(tg.url, { signal: AbortSignal.timeout(Math.max(500, everyMs - 200)) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      text = await res.text();
    } catch {
      return { t, target: tg.labels, ok: false, samples: [] };
    }
    // Outside the catch: text we cannot read is our bug, not a down target.
    return { t, target: tg.labels, ok: true, samples: parsePromText(text) };
  };
  const loop = (async () => {
    while (!stopped) {
      const started = Date.now();
      scrapes.push(...(await Promise.all(targets.map((tg) => one(tg, started / 1000)))));
      const wait = Math.max(0, everyMs - (Date.now() - started));
      await new Promise<void>((r) => {
        const timer = setTimeout(r, wait);
        wake = () => { clearTimeout(timer); r(); };
      });
    }
  })();
  return {
    scrapes,
    async stop() {
      stopped = true;
      wake();
      await loop;
    },
  };
}
