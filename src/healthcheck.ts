// `warmroute healthcheck`: the container's HEALTHCHECK. It asks the admin port of the gateway
// beside it for /healthz, and finds that port the way the gateway did: the same flags, the same
// WARMROUTE_* variables, the same config file. A HEALTHCHECK runs in the container's namespaces,
// where the gateway is PID 1, but it is not given the container's command line: without flags of
// its own it reads the serving process's from /proc/1/cmdline, so an admin port set by
// `docker run … serve --admin-port N` or by `--config FILE` is followed as one set by
// WARMROUTE_ADMIN_PORT is.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type ServeFlags } from './config/load.js';

/** The arguments after `serve` on a warmroute command line (NUL-separated, as /proc/PID/cmdline), or null if it is not one. */
export function serveArgsOf(cmdline: string): string[] | null {
  const argv = cmdline.split('\0');
  if (argv[argv.length - 1] === '') argv.pop();
  const at = argv.indexOf('serve');
  if (at < 0 || !argv.slice(0, at).some((a) => /(^|\/)(cli\.[jt]s|warmroute)$/.test(a))) return null;
  return argv.slice(at + 1);
}

/** The serve flags that decide the admin address (any other flag is the gateway's business). */
export function adminFlags(args: string[]): ServeFlags {
  const { values } = parseArgs({
    args,
    options: { config: { type: 'string' }, upstream: { type: 'string', multiple: true }, 'admin-host': { type: 'string' }, 'admin-port': { type: 'string' } },
    strict: false,
    allowPositionals: true,
  });
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return {
    config: str(values.config),
    upstream: Array.isArray(values.upstream) ? values.upstream.filter((u): u is string => typeof u === 'string') : undefined,
    adminHost: str(values['admin-host']),
    adminPort: str(values['admin-port']),
  };
}

/** The /healthz URL of the gateway those flags and that environment configure. */
export function healthzUrl(flags: ServeFlags, env: NodeJS.ProcessEnv): string {
  // The admin address does not depend on the replicas; a placeholder satisfies the one required key
  // when they come from somewhere this process cannot see.
  const hasUpstreams = flags.upstream?.length || env.WARMROUTE_UPSTREAM || flags.config || env.WARMROUTE_CONFIG;
  const config = loadConfig(hasUpstreams ? flags : { ...flags, upstream: ['http://127.0.0.1:1'] }, env);
  const host = config.admin.host === '0.0.0.0' || config.admin.host === '' ? '127.0.0.1'
    : config.admin.host === '::' ? '[::1]'
      : config.admin.host.includes(':') ? `[${config.admin.host}]` : config.admin.host;
  return `http://${host}:${config.admin.port}/healthz`;
}

function readCmdline(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return null;
  }
}

/** Exit code 0 when /healthz answers 200 within the time, 1 otherwise (Docker's healthy / unhealthy). */
export async function healthcheck(argv: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 2_500): Promise<number> {
  const own = argv.length > 0 ? argv : null;
  const args = own ?? serveArgsOf(readCmdline(1) ?? '') ?? [];
  let url: string;
  try {
    url = healthzUrl(adminFlags(args), env);
  } catch (e) {
    process.stderr.write(`warmroute healthcheck: ${e instanceof ConfigError ? e.message : (e as Error).message}\n`);
    return 1;
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    if (res.status === 200) return 0;
    process.stderr.write(`warmroute healthcheck: ${url} answered ${res.status}\n`);
  } catch (e) {
    process.stderr.write(`warmroute healthcheck: ${url}: ${(e as Error).message}\n`);
  }
  return 1;
}
