import type { TSchema } from '@sinclair/typebox';
import { literalChoices } from './problems.js';
import { ConfigSchema } from './schema.js';

/**
 * The one list of `warmroute serve` flags and their environment twins. What each sets, its
 * default and its allowed values come from the config schema at `path`; `warmroute serve --help`,
 * argv parsing and the environment reading are all made from this list.
 */
export interface FlagSpec {
  /** Key in ServeFlags. */
  key: string;
  /** Command-line name without the dashes; absent for settings kept off the command line (secrets). */
  flag?: string;
  env: string;
  /** Where it lands in the config; absent for --config itself. */
  path?: readonly string[];
  /** Placeholder in the help: `--port N`. */
  arg: string;
  summary: string;
  multiple?: boolean;
  /** Digits become a number, so the schema's integer check applies (anything else is named as it is). */
  numeric?: boolean;
}

export const SERVE_FLAGS = [
  { key: 'config', flag: 'config', env: 'WARMROUTE_CONFIG', arg: 'FILE', summary: 'YAML config file (reloaded on change and on SIGHUP)' },
  {
    key: 'upstream', flag: 'upstream', env: 'WARMROUTE_UPSTREAM', path: ['upstreams', 'url'], arg: 'URL', multiple: true,
    summary: 'a replica, http(s)://host:port with no path, or dns://name:port for every address of a DNS name; repeatable (environment: a comma- or space-separated list)',
  },
  { key: 'host', flag: 'host', env: 'WARMROUTE_HOST', path: ['listen', 'host'], arg: 'HOST', summary: 'data-plane address to listen on' },
  { key: 'port', flag: 'port', env: 'WARMROUTE_PORT', path: ['listen', 'port'], arg: 'N', numeric: true, summary: 'data-plane port (the OpenAI-compatible /v1/* API); 0 picks a free one' },
  { key: 'adminHost', flag: 'admin-host', env: 'WARMROUTE_ADMIN_HOST', path: ['admin', 'host'], arg: 'HOST', summary: 'admin address: /metrics, /healthz, /readyz, /admin' },
  { key: 'adminPort', flag: 'admin-port', env: 'WARMROUTE_ADMIN_PORT', path: ['admin', 'port'], arg: 'N', numeric: true, summary: 'admin port; 0 picks a free one' },
  { key: 'strategy', flag: 'strategy', env: 'WARMROUTE_STRATEGY', path: ['routing', 'strategy'], arg: 'NAME', summary: 'routing strategy' },
  {
    key: 'redis', flag: 'redis', env: 'WARMROUTE_REDIS', path: ['redis', 'url'], arg: 'URL',
    summary: 'share session pins between gateways: redis://host:port, rediss://, redis-sentinel://host:port,.../master or redis-cluster://host:port,...',
  },
  { key: 'logLevel', flag: 'log-level', env: 'WARMROUTE_LOG_LEVEL', path: ['logging', 'level'], arg: 'LEVEL', summary: 'log level' },
  { key: 'logFormat', flag: 'log-format', env: 'WARMROUTE_LOG_FORMAT', path: ['logging', 'format'], arg: 'FORMAT', summary: 'json for machines, pretty for a terminal' },
  { key: 'adminToken', env: 'WARMROUTE_ADMIN_TOKEN', path: ['admin', 'token'], arg: 'TOKEN', summary: 'bearer token every /admin/* request must carry (16+ characters)' },
  {
    key: 'sessionTagSecret', env: 'WARMROUTE_SESSION_TAG_SECRET', path: ['logging', 'sessionTagSecret'], arg: 'SECRET',
    summary: 'key of the session tags in logs; the same on every gateway sharing Redis (16+ characters)',
  },
] as const satisfies readonly FlagSpec[];

/** The schema of a setting, through objects and arrays (`upstreams.url` is every item's url). */
export function schemaAt(path: readonly string[], schema: TSchema = ConfigSchema): TSchema | undefined {
  let s: TSchema | undefined = schema;
  for (const key of path) {
    if (s?.type === 'array') s = s.items as TSchema;
    s = (s?.properties as Record<string, TSchema> | undefined)?.[key];
  }
  return s;
}

function line(spec: FlagSpec): string {
  const s = spec.path ? schemaAt(spec.path) : undefined;
  const choices = literalChoices(s);
  const facts = [
    spec.path?.[0] === 'upstreams' ? 'required (or `upstreams` in the config file)' : s && 'default' in s ? `default ${JSON.stringify(s.default)}` : null,
    spec.flag ? `env ${spec.env}` : null,
    spec.path ? `config ${spec.path[0] === 'upstreams' ? 'upstreams[].url' : spec.path.join('.')}` : null,
  ].filter(Boolean).join(' · ');
  const name = spec.flag ? `--${spec.flag} ${spec.arg}` : spec.env;
  const summary = choices ? `${spec.summary}: ${choices.join(' | ')}` : spec.summary;
  return `  ${name.padEnd(28)} ${summary}\n  ${''.padEnd(28)} ${facts}`;
}

export function serveHelp(): string {
  const flags = SERVE_FLAGS.filter((f) => 'flag' in f);
  const envOnly = SERVE_FLAGS.filter((f) => !('flag' in f));
  return `Usage: warmroute serve [flags]

Runs the gateway in front of the replicas given by --upstream (or the config file).

Flags (a flag beats its environment variable, which beats the config file, which beats the default):
${flags.map(line).join('\n')}
  -h, --help                   this help

Environment only (secrets stay off the command line):
${envOnly.map(line).join('\n')}

Every other setting is in the config file: config/warmroute.example.yaml shows each with its
default. SIGHUP, or a change to the file, reloads it; an invalid one is rejected and the running
one stays. Exit status: 2 for a usage or configuration error, 1 when the gateway cannot start
(a port in use) or fails.
`;
}
