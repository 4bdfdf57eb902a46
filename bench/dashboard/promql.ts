// The PromQL the Grafana dashboard uses, and nothing more: enough to draw its panels from scrapes
// held in memory, with no Prometheus. Anything outside this subset throws, naming the expression,
// so a later dashboard change cannot silently draw an empty panel.
//
//   expr     := term ('/' term)* ['>' NUMBER]                '>' filters: samples above the number stay
//   term     := histogram_quantile(NUMBER, sum by (le, ...) (rate(X_bucket{...}[d])))
//             | scalar(expr)
//             | (sum|min|max) [by (label, ...)] (expr)
//             | (rate|increase)(selector[d])
//             | selector                                   an instant vector (a gauge)
//   selector := metric_name [{label (=|!=|=~) "value", ...}]
//
// Template variables: `$job` (the dashboard's "All": `.*`) and `$__rate_interval` (a window of a
// few scrapes). Semantics are Prometheus 3's: left-open range windows, rate/increase extrapolated
// as its extrapolatedRate does, histogram_quantile's linear interpolation within a bucket,
// one-to-one vector matching on every label but the name, series gone stale when their target's
// latest scrape failed or no longer had them.

export type Labels = Readonly<Record<string, string>>;

export interface Sample {
  labels: Labels;
  value: number;
}

/** One scrape of one target: every sample it returned (none, and ok=false, when it failed). */
export interface Scrape {
  /** Seconds (any epoch, the same for every scrape). */
  t: number;
  /** The target labels Prometheus adds: job, instance. */
  target: Labels;
  ok: boolean;
  samples: Sample[];
}

export interface EvalOptions {
  /** What `$__rate_interval` stands for, in seconds. */
  rateIntervalS: number;
}

interface Matcher { label: string; op: '=' | '!=' | '=~'; value: string; re?: RegExp }
interface Selector { name: string; matchers: Matcher[] }
export type Node =
  | { kind: 'instant'; sel: Selector }
  | { kind: 'range-fn'; fn: 'rate' | 'increase'; sel: Selector; rangeS: number }
  | { kind: 'agg'; op: 'sum' | 'min' | 'max'; by: string[] | null; arg: Node }
  | { kind: 'quantile'; q: number; arg: Node }
  | { kind: 'scalar'; arg: Node }
  | { kind: 'div'; lhs: Node; rhs: Node }
  | { kind: 'above'; arg: Node; min: number };

type Value = { type: 'vector'; samples: Sample[] } | { type: 'scalar'; value: number };

// ---- parsing -------------------------------------------------------------------------------------

type Token = { t: 'ident' | 'string' | 'number' | 'punct' | 'duration'; v: string };

function tokenize(src: string, fail: (m: string) => never): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    const rest = src.slice(i);
    if (/\s/.test(c)) { i++; continue; }
    if (c === '[') {
      // A range: what is between the brackets is a duration (`5m`, `$__rate_interval`).
      const end = src.indexOf(']', i);
      if (end < 0) fail('an unclosed [');
      out.push({ t: 'punct', v: '[' }, { t: 'duration', v: src.slice(i + 1, end).trim() }, { t: 'punct', v: ']' });
      i = end + 1;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      let s = '';
      for (; j < src.length && src[j] !== '"'; j++) {
        if (src[j] === '\\') { j++; s += src[j] === 'n' ? '\n' : src[j]; } else s += src[j];
      }
      if (j >= src.length) fail('an unclosed string');
      out.push({ t: 'string', v: s });
      i = j + 1;
      continue;
    }
    const op = /^(!=|=~|!~|[(){},=/>])/.exec(rest);
    if (op) { out.push({ t: 'punct', v: op[0] }); i += op[0].length; continue; }
    const m = /^\d+(\.\d+)?/.exec(rest) ?? /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(rest);
    if (m) { out.push({ t: /^\d/.test(m[0]) ? 'number' : 'ident', v: m[0] }); i += m[0].length; continue; }
    fail(`${JSON.stringify(c)} (operator or syntax) is outside the subset`);
  }
  return out;
}

const UNIT_S: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** Parses one dashboard expression; throws `PromQL subset: <why> in <expr>` on anything else. */
export function parse(expr: string, o: EvalOptions): Node {
  const fail: (m: string) => never = (m) => { throw new Error(`PromQL subset: ${m} in ${expr}`); };
  const unknownVar = /\$(?!job\b|__rate_interval\b)\{?\w*/.exec(expr);
  if (unknownVar) fail(`the template variable ${unknownVar[0]} (only $job and $__rate_interval)`);
  const toks = tokenize(expr, fail);
  let p = 0;
  const peek = () => toks[p]?.v;
  const next = () => toks[p++] ?? fail('an unexpected end');
  const expect = (v: string) => { const t = next(); if (t.v !== v || t.t === 'string') fail(`${t.v} where ${v} was expected`); };
  const ident = (what: string) => { const t = next(); return t.t === 'ident' ? t.v : fail(`${t.v} where ${what} was expected`); };

  const selector = (name: string): Selector => {
    const matchers: Matcher[] = [];
    if (peek() === '{') {
      next();
      while (peek() !== '}') {
        const label = ident('a label name');
        const op = next().v;
        if (op !== '=' && op !== '!=' && op !== '=~') fail(`the matcher ${op} (only =, != and =~)`);
        const v = next();
        if (v.t !== 'string') fail('a label value that is not a quoted string');
        // `$job` is the dashboard's "All": Grafana substitutes its allValue, `.*`.
        const value = v.v.replaceAll('$job', '.*');
        matchers.push({ label, op, value, re: op === '=~' ? new RegExp(`^(?:${value})$`) : undefined });
        if (peek() === ',') next();
      }
      next();
    }
    return { name, matchers };
  };

  const duration = (): number => {
    expect('[');
    const d = next();
    expect(']');
    if (d.v === '$__rate_interval') return o.rateIntervalS;
    const m = /^(\d+)(ms|s|m|h)$/.exec(d.v);
    return m ? Number(m[1]) * UNIT_S[m[2]] : fail(`the duration ${d.v}`);
  };

  const args = (): Node => {
    expect('(');
    const arg = expression();
    expect(')');
    return arg;
  };

  const term = (): Node => {
    const name = ident('a metric or function');
    if (name === 'histogram_quantile') {
      expect('(');
      const q = next();
      if (q.t !== 'number') fail('a quantile that is not a number literal');
      expect(',');
      const arg = expression();
      expect(')');
      // The one shape that yields buckets: a sum by le (and more) of rate() over a _bucket series.
      const ok = arg.kind === 'agg' && arg.op === 'sum' && arg.by?.includes('le') && arg.arg.kind === 'range-fn' && arg.arg.fn === 'rate' && arg.arg.sel.name.endsWith('_bucket');
      if (!ok) fail('histogram_quantile of anything but sum by (le, ...) (rate(X_bucket[...]))');
      return { kind: 'quantile', q: Number(q.v), arg };
    }
    if (name === 'scalar') return { kind: 'scalar', arg: args() };
    if (name === 'sum' || name === 'min' || name === 'max') {
      let by: string[] | null = null;
      if (peek() === 'by') {
        next();
        expect('(');
        by = [];
        while (peek() !== ')') {
          by.push(ident('a label'));
          if (peek() === ',') next();
        }
        next();
      }
      return { kind: 'agg', op: name, by, arg: args() };
    }
    if (name === 'rate' || name === 'increase') {
      expect('(');
      const sel = selector(ident('a metric name'));
      const rangeS = duration();
      expect(')');
      return { kind: 'range-fn', fn: name, sel, rangeS };
    }
    if (peek() === '(') fail(`${name}() (only histogram_quantile, scalar, sum, min, max, rate, increase)`);
    const sel = selector(name);
    if (peek() === '[') fail(`a range selector outside rate()/increase() on ${name}`);
    return { kind: 'instant', sel };
  };

  const expression = (): Node => {
    let lhs = term();
    while (peek() === '/') {
      next();
      lhs = { kind: 'div', lhs, rhs: term() };
    }
    if (peek() === '>') {
      next();
      const n = next();
      if (n.t !== 'number') fail(`> ${n.v} (only > NUMBER)`);
      lhs = { kind: 'above', arg: lhs, min: Number(n.v) };
    }
    const t = peek();
    if (t !== undefined && t !== ')' && t !== ',') fail(`${t} after a term (only / or > NUMBER may follow one)`);
    return lhs;
  };

  const root = expression();
  if (p < toks.length) fail(`an unexpected ${toks[p].v}`);
  return root;
}

// ---- the data: scrapes as series -----------------------------------------------------------------

interface Series { labels: Labels; target: string; points: { t: number; v: number }[] }

const keyOf = (l: Labels) => JSON.stringify(Object.entries(l).sort(([a], [b]) => (a < b ? -1 : 1)));

/** The scrapes, indexed once: every series' points, and each target's scrape history. */
export class Tsdb {
  private readonly byName = new Map<string, Map<string, Series>>();
  /** Per target: its scrapes in time order (for staleness). */
  private readonly scrapesOf = new Map<string, { t: number; ok: boolean; keys: Set<string> }[]>();

  constructor(scrapes: readonly Scrape[]) {
    for (const s of [...scrapes].sort((a, b) => a.t - b.t)) {
      const tkey = keyOf(s.target);
      const keys = new Set<string>();
      for (const x of s.samples) {
        // The target's labels win over the sample's, as with honor_labels: false (none collide here).
        const labels = { ...x.labels, ...s.target };
        const k = keyOf(labels);
        keys.add(k);
        const name = labels.__name__;
        let m = this.byName.get(name);
        if (!m) this.byName.set(name, (m = new Map()));
        let series = m.get(k);
        if (!series) m.set(k, (series = { labels, target: tkey, points: [] }));
        series.points.push({ t: s.t, v: x.value });
      }
      let list = this.scrapesOf.get(tkey);
      if (!list) this.scrapesOf.set(tkey, (list = []));
      list.push({ t: s.t, ok: s.ok, keys });
    }
  }

  /** Metric names that have at least one series. */
  names(): Set<string> {
    return new Set(this.byName.keys());
  }

  select(sel: Selector): Series[] {
    const all = [...(this.byName.get(sel.name)?.values() ?? [])];
    return all.filter((s) => sel.matchers.every((m) => matches(m, s.labels[m.label] ?? '')));
  }

  /**
   * The series' value at t, as an instant selector sees it: the sample of its target's latest
   * scrape at or before t; none if that scrape failed or no longer had the series (Prometheus
   * writes a staleness marker then).
   */
  instant(s: Series, t: number): number | null {
    const scrapes = this.scrapesOf.get(s.target) ?? [];
    let last: (typeof scrapes)[number] | undefined;
    for (const x of scrapes) if (x.t <= t) last = x; else break;
    if (!last || !last.ok || !last.keys.has(keyOf(s.labels))) return null;
    return s.points.find((p) => p.t === last!.t)?.v ?? null;
  }
}

function matches(m: Matcher, v: string): boolean {
  if (m.op === '=') return v === m.value;
  if (m.op === '!=') return v !== m.value;
  return m.re!.test(v);
}

// ---- evaluation ----------------------------------------------------------------------------------

const withoutName = (l: Labels): Labels => {
  const { __name__: _, ...rest } = l;
  return rest;
};

/**
 * Prometheus's extrapolatedRate for a counter: the increase over the samples in (t − range, t],
 * counter resets added back, extrapolated towards the window's edges (all the way when the first
 * or last sample is within 1.1 average intervals of it, else half an interval; never below zero).
 */
export function extrapolatedIncrease(points: readonly { t: number; v: number }[], start: number, end: number): number | null {
  if (points.length < 2) return null;
  const first = points[0];
  const last = points[points.length - 1];
  let result = last.v - first.v;
  let prev = 0;
  for (const p of points) {
    if (p.v < prev) result += prev;
    prev = p.v;
  }
  const sampled = last.t - first.t;
  const avg = sampled / (points.length - 1);
  let toStart = first.t - start;
  let toEnd = end - last.t;
  if (toStart >= avg * 1.1) toStart = avg / 2;
  if (result > 0 && first.v >= 0) toStart = Math.min(toStart, sampled * (first.v / result));
  if (toEnd >= avg * 1.1) toEnd = avg / 2;
  return result * ((sampled + toStart + toEnd) / sampled);
}

/**
 * Prometheus's histogram_quantile over one set of cumulative buckets: the bucket where the rank
 * q × count falls, linear within it (from 0 for the first bucket); the +Inf bucket answers with
 * the highest finite bound. NaN with no observations or no +Inf bucket.
 */
export function bucketQuantile(q: number, buckets: readonly { le: number; count: number }[]): number {
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const b = [...buckets].sort((x, y) => x.le - y.le);
  if (b.length < 2 || b[b.length - 1].le !== Infinity) return NaN;
  // Cumulative counts must not fall (rates of separate series can jitter): as Prometheus does.
  for (let i = 1; i < b.length; i++) if (b[i].count < b[i - 1].count) b[i] = { ...b[i], count: b[i - 1].count };
  const total = b[b.length - 1].count;
  if (!(total > 0)) return NaN;
  let rank = q * total;
  let i = b.findIndex((x) => x.count >= rank);
  if (i < 0 || i === b.length - 1) return b[b.length - 2].le;
  if (i === 0 && b[0].le <= 0) return b[0].le;
  let start = 0;
  let count = b[i].count;
  if (i > 0) {
    start = b[i - 1].le;
    count -= b[i - 1].count;
    rank -= b[i - 1].count;
  }
  return start + (b[i].le - start) * (rank / count);
}

/** A dashboard expression, parsed once, evaluated at any instant over a Tsdb. */
export class Query {
  readonly node: Node;

  constructor(readonly expr: string, o: EvalOptions) {
    this.node = parse(expr, o);
  }

  /** Metric names the expression reads. */
  metrics(): string[] {
    const out: string[] = [];
    const walk = (n: Node): void => {
      if (n.kind === 'instant' || n.kind === 'range-fn') out.push(n.sel.name);
      else if (n.kind === 'div') { walk(n.lhs); walk(n.rhs); } else walk(n.arg);
    };
    walk(this.node);
    return [...new Set(out)];
  }

  /** The result at t as a vector (a scalar result is a vector of one unlabelled sample). */
  at(db: Tsdb, t: number): Sample[] {
    const v = this.eval(this.node, db, t);
    return v.type === 'vector' ? v.samples : [{ labels: {}, value: v.value }];
  }

  private fail(m: string): never {
    throw new Error(`PromQL subset: ${m} in ${this.expr}`);
  }

  private eval(n: Node, db: Tsdb, t: number): Value {
    switch (n.kind) {
      case 'instant': {
        const samples: Sample[] = [];
        for (const s of db.select(n.sel)) {
          const v = db.instant(s, t);
          if (v !== null) samples.push({ labels: s.labels, value: v });
        }
        return { type: 'vector', samples };
      }
      case 'range-fn': {
        const samples: Sample[] = [];
        for (const s of db.select(n.sel)) {
          const pts = s.points.filter((p) => p.t > t - n.rangeS && p.t <= t);
          const inc = extrapolatedIncrease(pts, t - n.rangeS, t);
          if (inc !== null) samples.push({ labels: withoutName(s.labels), value: n.fn === 'rate' ? inc / n.rangeS : inc });
        }
        return { type: 'vector', samples };
      }
      case 'agg': {
        const inner = this.vector(n.arg, db, t);
        const groups = new Map<string, Sample>();
        for (const s of inner) {
          const labels: Record<string, string> = {};
          for (const l of n.by ?? []) if (s.labels[l] !== undefined) labels[l] = s.labels[l];
          const k = keyOf(labels);
          const g = groups.get(k);
          if (!g) groups.set(k, { labels, value: s.value });
          else g.value = n.op === 'sum' ? g.value + s.value : n.op === 'min' ? Math.min(g.value, s.value) : Math.max(g.value, s.value);
        }
        return { type: 'vector', samples: [...groups.values()] };
      }
      case 'quantile': {
        const groups = new Map<string, { labels: Labels; buckets: { le: number; count: number }[] }>();
        for (const s of this.vector(n.arg, db, t)) {
          const { le, ...labels } = s.labels;
          const k = keyOf(labels);
          let g = groups.get(k);
          if (!g) groups.set(k, (g = { labels, buckets: [] }));
          g.buckets.push({ le: le === '+Inf' ? Infinity : Number(le), count: s.value });
        }
        return { type: 'vector', samples: [...groups.values()].map((g) => ({ labels: g.labels, value: bucketQuantile(n.q, g.buckets) })) };
      }
      case 'scalar': {
        const v = this.vector(n.arg, db, t);
        return { type: 'scalar', value: v.length === 1 ? v[0].value : NaN };
      }
      case 'above':
        // A comparison without `bool` filters (NaN is never above anything), labels kept.
        return { type: 'vector', samples: this.vector(n.arg, db, t).filter((s) => s.value > n.min) };
      case 'div': {
        const lhs = this.eval(n.lhs, db, t);
        const rhs = this.eval(n.rhs, db, t);
        if (lhs.type === 'scalar') this.fail('a scalar on the left of /');
        if (rhs.type === 'scalar') return { type: 'vector', samples: lhs.samples.map((s) => ({ labels: withoutName(s.labels), value: s.value / rhs.value })) };
        // One-to-one matching on every label but the name.
        const right = new Map<string, number>();
        for (const s of rhs.samples) {
          const k = keyOf(withoutName(s.labels));
          if (right.has(k)) this.fail('many-to-one matching (the right side has duplicate label sets)');
          right.set(k, s.value);
        }
        const samples: Sample[] = [];
        const seen = new Set<string>();
        for (const s of lhs.samples) {
          const labels = withoutName(s.labels);
          const k = keyOf(labels);
          if (seen.has(k)) this.fail('many-to-one matching (the left side has duplicate label sets)');
          seen.add(k);
          const r = right.get(k);
          if (r !== undefined) samples.push({ labels, value: s.value / r });
        }
        return { type: 'vector', samples };
      }
    }
  }

  private vector(n: Node, db: Tsdb, t: number): Sample[] {
    const v = this.eval(n, db, t);
    return v.type === 'vector' ? v.samples : this.fail('a scalar where a vector is needed');
  }
}

/** `{{label}}` in a legend format, as Grafana fills it (a missing label: empty). */
export function legendOf(format: string | undefined, labels: Labels): string {
  if (!format) {
    const inner = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(', ');
    return `{${inner}}`;
  }
  return format.replace(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g, (_, l: string) => labels[l] ?? '');
}
