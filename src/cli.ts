#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { argvProblem } from './config/argv.js';
import { SERVE_FLAGS, serveHelp } from './config/flags.js';
import { ConfigError, flagsFromEnv, loadConfig, misspelledEnv, type ServeFlags } from './config/load.js';
import { nearestName } from './config/nearest.js';
import { watchConfigFile } from './config/watch.js';
import { buildGateway } from './server.js';

const USAGE = `warmroute — session-affinity gateway for LLM serving

Usage:
  warmroute serve --upstream URL [--upstream URL]... [flags]   run the gateway
  warmroute probe --base-url URL --model M [flags]             measure TTFT as a client sees it
  warmroute --version                                          print the version

Run 'warmroute serve --help' or 'warmroute probe --help' for every flag of a command.`;

/** Usage and configuration errors: one line each on stderr, exit 2, no stack trace. */
const USAGE_ERROR = 2;

function version(): string {
  // package.json sits one level above both src/cli.ts and dist/cli.js, and ships in the package.
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

const SERVE_OPTIONS = {
  ...Object.fromEntries(SERVE_FLAGS.flatMap((f) => ('flag' in f ? [[f.flag, { type: 'string', multiple: 'multiple' in f }]] : []))),
  help: { type: 'boolean', short: 'h' },
} as Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>;

function usageError(line: string, command = 'serve'): number {
  process.stderr.write(`warmroute ${command}: ${line}\nRun 'warmroute ${command} --help' for every flag.\n`);
  return USAGE_ERROR;
}

/** A listen failure the user can act on (a port in use, a privileged port), as one line; else null. */
function listenProblem(e: unknown, config: { listen: { port: number }; admin: { port: number } }): string | null {
  const err = e as NodeJS.ErrnoException & { address?: string; port?: number };
  if (err?.code !== 'EADDRINUSE' && err?.code !== 'EACCES' && err?.code !== 'EADDRNOTAVAIL') return null;
  const which = err.port === config.admin.port && err.port !== config.listen.port ? '--admin-port' : '--port';
  const where = `${err.address ?? ''}:${err.port ?? ''}`;
  const why = err.code === 'EADDRINUSE' ? 'another process is listening there' : err.code === 'EACCES' ? 'permission denied' : 'no such address on this machine';
  return `cannot listen on ${where}: ${why} (choose another with ${which})`;
}

async function serve(argv: string[]): Promise<number> {
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: argv, options: SERVE_OPTIONS, strict: true }));
  } catch (e) {
    const line = argvProblem(e, Object.keys(SERVE_OPTIONS));
    if (line === null) throw e;
    return usageError(line);
  }
  if (values.help) {
    process.stdout.write(serveHelp());
    return 0;
  }
  const flags: ServeFlags = {};
  for (const spec of SERVE_FLAGS) {
    if ('flag' in spec && values[spec.flag] !== undefined) (flags as Record<string, unknown>)[spec.key] = values[spec.flag];
  }
  let config;
  try {
    config = loadConfig(flags);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`warmroute: ${e.message}\n`);
      return USAGE_ERROR;
    }
    throw e;
  }
  const gateway = buildGateway(config);
  for (const { name, meant } of misspelledEnv(process.env)) gateway.log.warn({ env: name, meant }, `${name} is not a setting and is ignored: did you mean ${meant}?`);
  try {
    await gateway.listen();
  } catch (e) {
    const line = listenProblem(e, config);
    if (line === null) throw e;
    process.stderr.write(`warmroute: ${line}\n`);
    await gateway.close().catch(() => undefined);
    return 1;
  }
  // Reload on SIGHUP and on a change to the config file. A bad new config is rejected with every
  // problem logged, and the running one stays.
  const reload = (trigger: string) => {
    try {
      // reconfigure() reads the new replicas' CA files before it applies anything.
      gateway.reconfigure(loadConfig(flags));
    } catch (e) {
      const problems = e instanceof ConfigError ? e.problems : [(e as Error).message];
      for (const problem of problems) gateway.log.error({ trigger, problem }, 'config reload: invalid');
      gateway.log.error({ trigger, problems: problems.length }, 'config reload rejected: the running configuration stays');
      gateway.metrics.configReloads.inc({ result: 'rejected' });
    }
  };
  const onHangUp = () => reload('SIGHUP');
  process.on('SIGHUP', onHangUp);
  const file = flags.config ?? flagsFromEnv(process.env).config;
  const watcher = file
    ? watchConfigFile(file, () => reload('file'), (err) => gateway.log.warn({ file, err: err.message }, 'config file cannot be watched: reload with SIGHUP'))
    : null;
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      // A reload during the drain would reconfigure a gateway that is going away.
      process.off('SIGHUP', onHangUp);
      watcher?.close();
      gateway.log.info({ signal }, 'shutting down');
      gateway.close().then(resolve, (e) => {
        gateway.log.error({ err: e }, 'error while closing');
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'probe': {
      const { probeMain } = await import('./probe/index.js');
      return probeMain(rest);
    }
    case 'healthcheck': {
      // The container's HEALTHCHECK: /healthz of the admin port the serving process was given.
      const { healthcheck } = await import('./healthcheck.js');
      return healthcheck(rest);
    }
    case '--version':
    case '-v':
    case 'version':
      process.stdout.write(`${version()}\n`);
      return 0;
    case 'help':
      // `warmroute help serve` is `warmroute serve --help`.
      if (rest[0] === 'serve' || rest[0] === 'probe') return main([rest[0], '--help']);
      process.stdout.write(`${USAGE}\n`);
      return 0;
    case undefined:
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? USAGE_ERROR : 0;
    default: {
      const near = nearestName(command.replace(/^-+/, ''), ['serve', 'probe', 'healthcheck', 'help', 'version']);
      process.stderr.write(`warmroute: unknown command ${JSON.stringify(command)}${near ? `; did you mean ${near}?` : ''}\n\n${USAGE}\n`);
      return USAGE_ERROR;
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    process.stderr.write(`warmroute: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
