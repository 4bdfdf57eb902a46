// `helm template` for helm/warmroute, with no helm binary: the chart's values coalesced as Helm
// does (a user's maps merge into the defaults, lists replace, null deletes), the built-in objects
// (.Values, .Release, .Chart, .Files, .Template, .Capabilities), the Helm and Sprig functions the
// chart calls, each written to Helm's semantics, and every non-partial template rendered and split
// into YAML documents. The template language itself is gotemplate.ts.
//
// What this cannot check (the chart's README says so too): the Kubernetes API's own validation of
// the objects (field names and types beyond what the tests assert), CRDs (ServiceMonitor), and the
// corners of Go templates and Sprig the chart does not use.

import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseAllDocuments, parse as parseYaml, stringify } from 'yaml';
import { Engine, formatFloat, GoInt, printValue, TemplateError, truthy, type Fn } from './gotemplate.js';

export type Values = Record<string, any>;

export interface Rendered {
  /** template path (templates/x.yaml) → its output. */
  files: Record<string, string>;
  /** Every YAML document of every template, parsed. */
  objects: Values[];
}

const isMap = (v: unknown): v is Values => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof GoInt);

/** Helm's coalesce: `over` wins; maps merge key by key; a null in `over` deletes the key. */
export function coalesce(base: Values, over: Values): Values {
  const out: Values = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else if (isMap(v) && isMap(out[k])) out[k] = coalesce(out[k], v);
    else out[k] = v;
  }
  return out;
}

const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const num = (v: unknown): number => (v instanceof GoInt ? v.v : typeof v === 'number' ? v : Number(v));

/** Go's eq/lt refuse to compare an int with a float64; Helm's YAML numbers are float64. */
function kindOf(v: unknown): string {
  if (v instanceof GoInt) return 'int';
  if (typeof v === 'number') return 'float';
  if (v === null || v === undefined) return 'nil';
  return typeof v;
}
function comparable(a: unknown, b: unknown, op: string): [unknown, unknown] {
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka !== kb) throw new TemplateError(`${op}: incompatible types for comparison (${ka} and ${kb})`);
  return [a instanceof GoInt ? a.v : a, b instanceof GoInt ? b.v : b];
}

/** JSON for toYaml/toJson: GoInt becomes a plain number. */
function plain(v: unknown): unknown {
  if (v instanceof GoInt) return v.v;
  if (Array.isArray(v)) return v.map(plain);
  if (isMap(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** Go's %v / %s / %d / %q, enough for printf in a chart. */
function printf(format: string, ...args: unknown[]): string {
  let i = 0;
  return format.replace(/%([vsdq%])/g, (_m, verb: string) => {
    if (verb === '%') return '%';
    const a = args[i++];
    if (verb === 'q') return JSON.stringify(String(a));
    if (verb === 'd') return String(Math.trunc(num(a)));
    return typeof a === 'number' ? formatFloat(a) : printValue(a);
  });
}

function helmFuncs(engine: () => Engine): Record<string, Fn> {
  const indent = (n: unknown, s: unknown) => {
    const pad = ' '.repeat(num(n));
    return pad + String(s ?? '').replace(/\n/g, `\n${pad}`);
  };
  return {
    // Helm
    include: (name: string, data: unknown) => engine().include(name, data),
    toYaml: (v: unknown) => (v === null || v === undefined ? 'null' : stringify(plain(v), { sortMapEntries: true, indentSeq: false, lineWidth: 0 }).replace(/\n$/, '')),
    toJson: (v: unknown) => JSON.stringify(plain(v)),
    required: (msg: string, v: unknown) => {
      if (v === null || v === undefined || v === '') throw new TemplateError(`execution error: required: ${msg}`);
      return v;
    },
    fail: (msg: string) => { throw new TemplateError(`execution error: fail: ${msg}`); },
    // Sprig
    default: (def: unknown, v?: unknown) => (truthy(v) ? v : def),
    empty: (v: unknown) => !truthy(v),
    quote: (...xs: unknown[]) => xs.filter((x) => x !== null && x !== undefined).map((x) => JSON.stringify(typeof x === 'number' ? formatFloat(x) : printValue(x))).join(' '),
    indent,
    nindent: (n: unknown, s: unknown) => `\n${indent(n, s)}`,
    trunc: (n: unknown, s: string) => String(s).slice(0, num(n)),
    trimSuffix: (suf: string, s: string) => (String(s).endsWith(suf) ? String(s).slice(0, -suf.length) : String(s)),
    int: (v: unknown) => new GoInt(Math.trunc(num(v))),
    add: (...xs: unknown[]) => new GoInt(xs.reduce<number>((a, x) => a + num(x), 0)),
    mul: (...xs: unknown[]) => new GoInt(xs.reduce<number>((a, x) => a * num(x), 1)),
    div: (a: unknown, b: unknown) => new GoInt(Math.trunc(num(a) / num(b))),
    printf,
    print: (...xs: unknown[]) => xs.map(printValue).join(''),
    toString: (v: unknown) => printValue(v),
    sha256sum: (s: string) => createHash('sha256').update(String(s)).digest('hex'),
    b64enc: (s: string) => Buffer.from(String(s)).toString('base64'),
    // Sprig's: letters and digits from crypto/rand.
    randAlphaNum: (n: unknown) => Array.from(randomBytes(num(n)), (b) => ALNUM[b % ALNUM.length]).join(''),
    get: (m: Values, k: string) => (isMap(m) && Object.hasOwn(m, k) ? m[k] : ''),
    // Helm's lookup reads the cluster; `helm template` (and this) has none: an empty map.
    lookup: () => ({}),
    dict: (...kv: unknown[]) => Object.fromEntries(Array.from({ length: kv.length / 2 }, (_, i) => [String(kv[2 * i]), kv[2 * i + 1]])),
    list: (...xs: unknown[]) => xs,
    hasKey: (m: Values, k: string) => isMap(m) && Object.hasOwn(m, k),
    // Go built-ins
    eq: (a: unknown, ...bs: unknown[]) => bs.some((b) => { const [x, y] = comparable(a, b, 'eq'); return x === y; }),
    ne: (a: unknown, b: unknown) => { const [x, y] = comparable(a, b, 'ne'); return x !== y; },
    lt: (a: unknown, b: unknown) => { const [x, y] = comparable(a, b, 'lt'); return (x as number) < (y as number); },
    le: (a: unknown, b: unknown) => { const [x, y] = comparable(a, b, 'le'); return (x as number) <= (y as number); },
    gt: (a: unknown, b: unknown) => { const [x, y] = comparable(a, b, 'gt'); return (x as number) > (y as number); },
    ge: (a: unknown, b: unknown) => { const [x, y] = comparable(a, b, 'ge'); return (x as number) >= (y as number); },
    not: (v: unknown) => !truthy(v),
    and: () => { throw new TemplateError('and is evaluated by the engine'); },
    or: () => { throw new TemplateError('or is evaluated by the engine'); },
    len: (v: unknown) => new GoInt(Array.isArray(v) || typeof v === 'string' ? v.length : isMap(v) ? Object.keys(v).length : 0),
  };
}

export interface RenderOptions {
  releaseName?: string;
  namespace?: string;
  /** Values files' contents, applied in order over the chart's values.yaml (as `-f a -f b`). */
  values?: Values[];
}

/** helm template RELEASE CHART_DIR [-f ...]. */
export function renderChart(chartDir: string, o: RenderOptions = {}): Rendered {
  const chart = parseYaml(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as Values;
  let values = (parseYaml(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) ?? {}) as Values;
  for (const v of o.values ?? []) values = coalesce(values, v);
  const readChartFile = (path: string) => {
    const p = join(chartDir, path);
    // Helm's .Files.Get: the file's contents, or "" when the chart has no such file.
    return existsSync(p) ? readFileSync(p, 'utf8') : '';
  };
  let engine: Engine;
  engine = new Engine(helmFuncs(() => engine));
  const name = chart.name as string;
  const templates = readdirSync(join(chartDir, 'templates')).filter((f) => /\.(ya?ml|tpl|txt)$/.test(f)).sort();
  // Each file is a template named chart/templates/file, as in Helm (include (print $.Template.BasePath "/x.yaml") .).
  for (const f of templates) engine.add(`${name}/templates/${f}`, readFileSync(join(chartDir, 'templates', f), 'utf8'));
  const files: Record<string, string> = {};
  const objects: Values[] = [];
  for (const f of templates) {
    const path = `templates/${f}`;
    // Partials (_*.tpl) and NOTES.txt render no manifest.
    if (f.startsWith('_') || f === 'NOTES.txt') continue;
    const top = {
      Values: values,
      Release: { Name: o.releaseName ?? 'release-name', Namespace: o.namespace ?? 'default', Service: 'Helm', IsInstall: true, IsUpgrade: false },
      Chart: { Name: name, Version: chart.version, AppVersion: chart.appVersion, ...chart },
      Files: { Get: readChartFile },
      Template: { Name: `${name}/${path}`, BasePath: `${name}/templates` },
      Capabilities: { KubeVersion: { Version: 'v1.31.0' } },
    };
    const out = engine.render(`${name}/${path}`, top);
    files[path] = out;
    for (const doc of parseAllDocuments(out)) {
      if (doc.errors.length) throw new Error(`${path}: invalid YAML: ${doc.errors[0].message}\n${out}`);
      const v = doc.toJS() as Values | null;
      if (v !== null) objects.push(v);
    }
  }
  return { files, objects };
}

/** Every file under `dir`, as paths relative to it (the chart's own file list). */
export function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}
