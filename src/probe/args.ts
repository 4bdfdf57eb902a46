// `warmroute probe` argv → ProbeOptions. The flag names are a user contract; keep them stable.

import { parseArgs } from 'node:util';

import { argvProblem } from '../config/argv.js';
import { resolveBaseUrl } from './endpoint.js';
import { CASE_IDS, type CaseId } from './prompts.js';
import { DEFAULTS, type ProbeOptions } from './run.js';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type ParsedArgs = { help: true } | { help: false; json: boolean; options: ProbeOptions };

export const USAGE = `Usage: warmroute probe --base-url URL --model M [options]

Measures time to first token (TTFT) the way a client sees it: one warm keep-alive connection,
stream: true, no concurrency, no retries. TTFT runs from sending the request to the first SSE chunk
carrying content (text or a tool call); the role-only opener does not count.

Cases:
  tiny       ~30-token prompt, same bytes every trial (the warm floor)
  fresh1k    fresh ~1K-token prompt (unique nonce first, never cached)
  cold5k     cold ~5.5K-token prefill (unique nonce first)
  repeat9k   ~9K-token prompt sent twice with identical bytes: 1st = cold, 2nd = warm (cache hit?)

Options:
  --base-url URL       OpenAI-compatible endpoint, with or without a trailing /v1 (required)
  --model M            model name sent in the request (required)
  --compare URL2       probe a second endpoint too, trials interleaved A, B, A, B; adds B/A columns
  --trials N           trials per case and endpoint (default ${DEFAULTS.trials})
  --cases LIST         comma-separated subset of: ${CASE_IDS.join(',')} (default: all)
  --api-key KEY        sent as "Authorization: Bearer KEY" (default: $OPENAI_API_KEY)
  --header 'N: v'      extra request header, repeatable (e.g. --header 'x-session-id: s1')
  --timeout-ms MS      per-request timeout (default ${DEFAULTS.timeoutMs})
  --max-tokens N       max_tokens per request (default ${DEFAULTS.maxTokens})
  --traces URL         Jaeger's query API (e.g. http://jaeger:16686): send a traceparent per request,
                       then print each request's trace: the gateway's hops beside the replica's
                       queue, prefill and decode (vLLM's llm_request span)
  --traces-wait-ms MS  how long to wait after the run for the spans to arrive (default ${DEFAULTS.tracesWaitMs})
  --json               print one JSON object instead of the table
  -h, --help           show this help

Exit status: 0 when every case produced at least one successful trial on every endpoint,
1 when some case produced none, 2 on a usage error or when an endpoint (or the --traces query API)
cannot be reached.
`;

const PROBE_FLAGS = ['base-url', 'model', 'compare', 'trials', 'cases', 'api-key', 'header', 'timeout-ms', 'max-tokens', 'traces', 'traces-wait-ms', 'json', 'help'];

export function parseProbeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ParsedArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        'base-url': { type: 'string' },
        model: { type: 'string' },
        compare: { type: 'string' },
        trials: { type: 'string' },
        cases: { type: 'string' },
        'api-key': { type: 'string' },
        header: { type: 'string', multiple: true },
        'timeout-ms': { type: 'string' },
        'max-tokens': { type: 'string' },
        traces: { type: 'string' },
        'traces-wait-ms': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    // parseArgs's message is written for programmers; the user gets the flag and its nearest valid name.
    throw new UsageError(argvProblem(err, PROBE_FLAGS) ?? (err as Error).message);
  }
  if (values.help) return { help: true };

  const baseUrl = required(values['base-url'], '--base-url');
  const model = required(values.model, '--model');
  checkUrl(baseUrl, '--base-url');
  if (values.compare !== undefined) checkUrl(values.compare, '--compare');
  if (values.traces !== undefined) checkTracesUrl(values.traces);

  const options: ProbeOptions = {
    baseUrl,
    model,
    compareUrl: values.compare,
    trials: positiveInt(values.trials, '--trials', DEFAULTS.trials),
    timeoutMs: positiveInt(values['timeout-ms'], '--timeout-ms', DEFAULTS.timeoutMs),
    maxTokens: positiveInt(values['max-tokens'], '--max-tokens', DEFAULTS.maxTokens),
    cases: parseCases(values.cases),
    headers: parseHeaders(values.header ?? []),
  };
  if (values.traces !== undefined) {
    options.tracesUrl = values.traces.trim();
    options.tracesWaitMs = positiveInt(values['traces-wait-ms'], '--traces-wait-ms', DEFAULTS.tracesWaitMs);
  } else if (values['traces-wait-ms'] !== undefined) {
    throw new UsageError('--traces-wait-ms needs --traces');
  }
  const apiKey = values['api-key'] ?? env.OPENAI_API_KEY;
  if (apiKey) options.apiKey = apiKey;
  return { help: false, json: values.json === true, options };
}

function required(v: string | undefined, flag: string): string {
  if (v === undefined || v.trim() === '') throw new UsageError(`${flag} is required`);
  return v.trim();
}

function checkUrl(raw: string, flag: string): void {
  try {
    resolveBaseUrl(raw);
  } catch (err) {
    throw new UsageError(`${flag}: ${(err as Error).message}`);
  }
}

function checkTracesUrl(raw: string): void {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new UsageError(`--traces: not a valid URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--traces: URL must be http:// or https://: ${raw}`);
}

function positiveInt(v: string | undefined, flag: string, fallback: number): number {
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v.trim()) || Number(v) < 1) {
    throw new UsageError(`${flag} must be a positive integer, got '${v}'`);
  }
  return Number(v);
}

function parseCases(v: string | undefined): CaseId[] {
  if (v === undefined) return [...CASE_IDS];
  const names = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (names.length === 0) throw new UsageError(`--cases is empty; choose from ${CASE_IDS.join(',')}`);
  for (const n of names) {
    if (!(CASE_IDS as readonly string[]).includes(n)) {
      throw new UsageError(`--cases: unknown case '${n}'; choose from ${CASE_IDS.join(',')}`);
    }
  }
  // Run in the canonical order whatever order was typed, and each case once.
  return CASE_IDS.filter((id) => names.includes(id));
}

function parseHeaders(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of raw) {
    const i = h.indexOf(':');
    const name = i > 0 ? h.slice(0, i).trim() : '';
    if (!name || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
      throw new UsageError(`--header must look like 'Name: value', got '${h}'`);
    }
    // Lower-cased so a --header Authorization overrides --api-key the way a user would expect.
    out[name.toLowerCase()] = h.slice(i + 1).trim();
  }
  return out;
}
