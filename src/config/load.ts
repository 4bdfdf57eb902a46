import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { withDefaults } from './defaults.js';
import { SERVE_FLAGS, type FlagSpec } from './flags.js';
import { nearestName } from './nearest.js';
import { ConfigSchema, VLLM_OPERATOR_PATHS, type AdaptersConfig, type ResolvedConfig, type RoutingOptions, type UpstreamConfig } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    // One problem is one line; several are one line each under the heading.
    super(problems.length === 1 ? `invalid configuration: ${problems[0]}` : `invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

/** Command-line flags of `warmroute serve`; each has a WARMROUTE_* environment twin (config/flags.ts). */
export interface ServeFlags {
  config?: string;
  upstream?: string[];
  host?: string;
  port?: string;
  adminHost?: string;
  adminPort?: string;
  strategy?: string;
  redis?: string;
  logLevel?: string;
  logFormat?: string;
  /** Environment only (WARMROUTE_ADMIN_TOKEN): a secret does not belong on a command line. */
  adminToken?: string;
  /** Environment only (WARMROUTE_SESSION_TAG_SECRET), like the admin token. */
  sessionTagSecret?: string;
}

type FlagKey = keyof ServeFlags;
const SPECS: readonly (FlagSpec & { key: FlagKey })[] = SERVE_FLAGS;

/** Flags from the environment: WARMROUTE_UPSTREAM holds a comma- or space-separated list. */
export function flagsFromEnv(env: NodeJS.ProcessEnv): ServeFlags {
  const out: ServeFlags = {};
  for (const spec of SPECS) {
    const v = env[spec.env];
    if (v === undefined || v === '') continue;
    if (spec.key === 'upstream') out.upstream = v.split(/[\s,]+/).filter(Boolean);
    else (out as Record<string, string>)[spec.key] = v;
  }
  return out;
}

/**
 * WARMROUTE_* variables that are no setting but one letter or three away from one
 * (WARMROUTE_STRATEGIE): ignored, so worth a warning. Others (a tool's own WARMROUTE_ names) are
 * left alone.
 */
export function misspelledEnv(env: NodeJS.ProcessEnv): { name: string; meant: string }[] {
  const known = SPECS.map((s) => s.env);
  return Object.keys(env).flatMap((name) => {
    if (!name.startsWith('WARMROUTE_') || known.includes(name)) return [];
    const meant = nearestName(name, known);
    return meant ? [{ name, meant }] : [];
  });
}

type Raw = Record<string, any>;

function setPath(obj: Raw, path: readonly string[], value: unknown): void {
  let o = obj;
  for (const k of path.slice(0, -1)) o = o[k] ??= {};
  o[path[path.length - 1]] = value;
}

/** A number from a flag, kept as the string when it is not one so validation names it. */
function num(v: string): number | string {
  return /^\d+$/.test(v) ? Number(v) : v;
}

function applyFlags(raw: Raw, f: ServeFlags): void {
  if (f.upstream?.length) raw.upstreams = f.upstream.map((url) => ({ url }));
  for (const spec of SPECS) {
    const v = f[spec.key];
    if (v === undefined || !spec.path || spec.key === 'upstream') continue;
    setPath(raw, spec.path, spec.numeric ? num(v as string) : v);
  }
}

/**
 * A problem with a setting that came from a flag or an environment variable names that flag or
 * variable (`--strategy: "sticky" is not one of ...`): it is what the user typed.
 */
function namedBySource(problem: string, flags: ServeFlags, fromEnv: ServeFlags): string {
  for (const spec of SPECS) {
    if (!spec.path) continue;
    const at = spec.key === 'upstream' ? /^\/upstreams\/\d+\/url:/ : new RegExp(`^/${spec.path.join('/')}:`);
    if (!at.test(problem)) continue;
    const source = flags[spec.key] !== undefined && 'flag' in spec ? `--${spec.flag}` : fromEnv[spec.key] !== undefined ? spec.env : null;
    // Neither: the setting came from the config file, whose path the problem already names.
    if (source) return problem.replace(/^[^:]+:/, `${source}:`);
  }
  return problem;
}

function readFile(path: string): Raw {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === 'ENOENT' ? 'no such file' : err.code === 'EACCES' ? 'permission denied' : err.message;
    throw new ConfigError([`cannot read config file ${path}: ${why}`]);
  }
  try {
    const doc = parseYaml(text) as unknown;
    if (doc === null || doc === undefined) return {};
    if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error('the top level must be a mapping');
    return doc as Raw;
  } catch (e) {
    // The YAML parser's message goes on with a code frame over several lines; its first line names
    // the problem and its line and column.
    throw new ConfigError([`${path}: ${(e as Error).message.split('\n')[0].replace(/:$/, '')}`]);
  }
}

function upstreamName(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

/**
 * Builds the running configuration: defaults < file < environment < flags.
 * Every problem is reported at once, each with its path; the result is frozen.
 */
export function loadConfig(flags: ServeFlags, env: NodeJS.ProcessEnv = process.env): ResolvedConfig {
  const fromEnv = flagsFromEnv(env);
  const file = flags.config ?? fromEnv.config;
  const raw: Raw = file ? readFile(file) : {};
  applyFlags(raw, fromEnv);
  applyFlags(raw, flags);
  if (raw.upstreams === undefined) {
    throw new ConfigError(['no upstream replicas: pass --upstream URL (repeatable), set WARMROUTE_UPSTREAM, or list `upstreams` in the config file']);
  }
  let config: ResolvedConfig;
  try {
    config = resolveConfig(raw);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError(e.problems.map((p) => namedBySource(p, flags, fromEnv)));
  }
  const unreadable = config.upstreams.flatMap((u, i) => {
    if (!u.tls?.caFile) return [];
    try {
      readFileSync(u.tls.caFile);
      return [];
    } catch (e) {
      return [`/upstreams/${i}/tls/caFile: cannot read ${u.tls.caFile}: ${(e as Error).message}`];
    }
  });
  if (unreadable.length) throw new ConfigError(unreadable);
  return config;
}

/** Checks across fields that a schema cannot state. */
export function routingOptionProblems(o: RoutingOptions, at = '/routing/options'): string[] {
  return o.hardCapFactor >= o.loadFactor ? [] : [`${at}/hardCapFactor: must be ≥ loadFactor (${o.loadFactor}) (got ${o.hardCapFactor})`];
}

/** Validates a raw config object (as read from YAML), fills defaults, names upstreams, freezes. */
export function resolveConfig(raw: Raw): ResolvedConfig {
  const { value, problems } = withDefaults(ConfigSchema, raw);
  if (problems.length) throw new ConfigError(problems);
  const upstreams: UpstreamConfig[] = value.upstreams.map((u) => ({
    ...u,
    url: u.url.replace(/\/$/, ''),
    name: u.name ?? upstreamName(u.url),
  }));
  problems.push(...routingOptionProblems(value.routing.options));
  const seen = new Set<string>();
  for (const [i, u] of upstreams.entries()) {
    if (seen.has(u.name)) problems.push(`/upstreams/${i}/name: duplicate replica name ${u.name}`);
    seen.add(u.name);
    // A DNS name's members are reached over plain http (discovery/memberOf): TLS settings would be ignored.
    if (u.url.startsWith('dns:') && u.tls) problems.push(`/upstreams/${i}/tls: not supported on a dns:// upstream (its replicas are reached over http)`);
  }
  problems.push(...adapterProblems(value.adapters));
  for (const [i, p] of value.routes.extraPaths.entries()) {
    if (VLLM_OPERATOR_PATHS.includes(p)) problems.push(`/routes/extraPaths/${i}: ${p} is vLLM's operator route, never forwarded for a client (the gateway loads adapters itself: adapters.sources)`);
  }
  if (problems.length) throw new ConfigError(problems);
  return deepFreeze({ ...value, upstreams });
}

/** A version rollout must name versions with some weight, and no client name may be one of its own versions. */
export function adapterProblems(a: AdaptersConfig, at = '/adapters/versions'): string[] {
  const out: string[] = [];
  for (const [name, versions] of Object.entries(a.versions)) {
    const weights = Object.values(versions);
    if (weights.length === 0 || !weights.some((w) => w > 0)) out.push(`${at}/${name}: needs at least one version with a weight above 0`);
    if (name in versions) out.push(`${at}/${name}: a client model name cannot be one of its own versions`);
  }
  return out;
}

/** Settings that cost latency or visibility; each is logged at warn on start. */
export function performanceWarnings(c: ResolvedConfig): string[] {
  const w: string[] = [];
  if (c.routing.strategy !== 'affinity') {
    w.push(`routing.strategy is ${c.routing.strategy}: prefix-cache affinity is OFF, so sessions will re-prefill on cold replicas`);
  }
  if (!c.routing.sessionKeySources.some((x) => typeof x === 'string' || x.enabled)) w.push('routing.sessionKeySources has no enabled source: explicit session keys are ignored');
  if (c.routing.sessionTtlMs < 60_000) w.push(`routing.sessionTtlMs is ${c.routing.sessionTtlMs} ms: pins expire before most voice sessions take their next turn`);
  if (!c.headers.serverTiming) w.push('headers.serverTiming is off: clients cannot see per-hop timings');
  if (c.logging.logPrompts) w.push('logging.logPrompts is on: prompt text will appear in debug logs');
  return w;
}

export function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
