#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError, flagsFromEnv, loadConfig, type ServeFlags } from './config/load.js';
import { watchConfigFile } from './config/watch.js';
import { buildGateway } from './server.js';

const USAGE = `warmroute — session-affinity gateway for LLM serving

Usage:
  warmroute serve [--config FILE] [--upstream URL]... [--host H] [--port N] [--admin-port N]
                  [--admin-host H] [--strategy affinity|round-robin|least-loaded|session-hash]
                  [--redis URL] [--log-level L]
  warmroute probe --base-url URL --model M [--compare URL2] [--json] [--trials N]   (see: warmroute probe --help)

  --upstream takes http(s)://host:port, or dns://name:port for every address of a DNS name;
  --redis takes redis://, redis-sentinel://host:port,.../master or redis-cluster://host:port,...

Every serve flag has an environment twin (WARMROUTE_UPSTREAM, WARMROUTE_PORT, ...).
Precedence: flag > environment > config file > defaults. SIGHUP (or a change to the config file)
reloads the configuration; an invalid one is rejected and the running one stays.`;

const SERVE_OPTIONS = {
  config: { type: 'string' },
  upstream: { type: 'string', multiple: true },
  host: { type: 'string' },
  port: { type: 'string' },
  'admin-host': { type: 'string' },
  'admin-port': { type: 'string' },
  strategy: { type: 'string' },
  redis: { type: 'string' },
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

async function serve(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: SERVE_OPTIONS, strict: true });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const flags: ServeFlags = {
    config: values.config, upstream: values.upstream, host: values.host, port: values.port,
    adminHost: values['admin-host'], adminPort: values['admin-port'], strategy: values.strategy,
    redis: values.redis, logLevel: values['log-level'],
  };
  let config;
  try {
    config = loadConfig(flags);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`warmroute: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const gateway = buildGateway(config);
  await gateway.listen();
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
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`warmroute: unknown command ${JSON.stringify(command)}\n\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    process.stderr.write(`warmroute: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
