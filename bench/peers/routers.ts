// Starting each peer router the way its own docs start it, on loopback, one at a time, each a
// process group of its own (a Python launcher and the Rust router it runs, nginx's master and
// worker), so that stop() ends exactly what was started. How each is configured, and why that is
// fair to it, is in docs/peers.md.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { nginxConf, nginxDir } from '../lib/nginx.js';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startChild, type Child } from '../lib/procs.js';
import { waitForPort } from '../overhead/targets.js';

export const PEERS_VENV = process.env.WARMROUTE_PEERS_VENV ?? join(homedir(), '.cache/warmroute/venv-peers');

export interface Router {
  url: string;
  /** Sent with every request through this router (LiteLLM's key). */
  headers: Record<string, string>;
  /** Why it is gone if it exited before stop() (and its last output), else null. */
  died(): string | null;
  stop(): Promise<void>;
  /** Its process (a group leader when it starts others), for its CPU time; null when unknown. */
  pid: number | null;
}

/** Keeps a child's last output, and notices an exit that stop() did not ask for. */
function watch(child: Child, what: string): Omit<Router, 'pid'> & { tail(): string } {
  let tail = '';
  const keep = (d: Buffer) => { tail = (tail + d.toString()).slice(-3000); };
  child.proc.stdout?.on('data', keep);
  child.proc.stderr?.on('data', keep);
  let stopping = false;
  let died: string | null = null;
  child.proc.once('exit', (code, signal) => {
    if (!stopping) died = `${what} exited (code ${code}, signal ${signal}) before it was stopped; its last output:\n${tail.trim() || '(none)'}`;
  });
  return {
    url: '',
    headers: {},
    died: () => died,
    tail: () => tail,
    stop: () => {
      stopping = true;
      return child.stop();
    },
  };
}

/**
 * Ready once a request through the router reaches a replica: GET /v1/models answers 200. Bounded;
 * a router that never gets there is stopped and the run fails with its last output.
 */
async function untilServing(r: Omit<Router, 'pid'> & { tail(): string }, url: string, what: string, timeoutMs: number, headers: Record<string, string>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const died = r.died();
    if (died) throw new Error(died);
    try {
      const res = await fetch(`${url}/v1/models`, { headers, signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) {
      await r.stop();
      throw new Error(`${what} did not serve /v1/models within ${timeoutMs / 1000} s; its last output:\n${r.tail().trim() || '(none)'}`);
    }
    await new Promise((res) => setTimeout(res, 250));
  }
}

async function startGroup(what: string, cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number, port: number, headers: Record<string, string> = {}): Promise<Router> {
  const child = await startChild(cmd, args, null, { group: true, env });
  const r = watch(child, what);
  try {
    await waitForPort(port, timeoutMs);
  } catch (e) {
    await r.stop();
    throw new Error(`${what}: ${(e as Error).message}; its last output:\n${r.tail().trim() || '(none)'}`);
  }
  const url = `http://127.0.0.1:${port}`;
  await untilServing(r, url, what, timeoutMs, headers);
  return { url, headers, died: r.died, stop: r.stop, pid: child.proc.pid ?? null };
}

const venvBin = (name: string) => join(PEERS_VENV, 'bin', name);

/**
 * SGLang's router (PyPI sglang-router), launched as its docs show:
 * `python -m sglang_router.launch_router --worker-urls ... --policy P`. Its Prometheus exporter
 * gets a free port of its own, so it never collides with anything else on the machine.
 */
export async function startSglang(workers: readonly string[], policy: 'cache_aware' | 'manual'): Promise<Router> {
  const [port, prom] = [await freePort(), await freePort()];
  // manual: 0.3.2's sticky sessions on the X-SMG-Routing-Key header (it has no consistent_hashing
  // policy yet); a new key goes to the worker holding the fewest keys, its most even assignment.
  const sticky = policy === 'manual' ? ['--assignment-mode', 'min_group'] : [];
  return startGroup(`sglang-router (${policy})`, venvBin('python'), [
    '-m', 'sglang_router.launch_router', '--host', '127.0.0.1', '--port', String(port),
    '--worker-urls', ...workers, '--policy', policy, ...sticky,
    '--prometheus-host', '127.0.0.1', '--prometheus-port', String(prom), '--log-level', 'warn',
  ], {}, 90_000, port);
}

/** vLLM's router (PyPI vllm-router), as its docs show: `vllm-router --worker-urls ... --policy P`. */
export async function startVllmRouter(workers: readonly string[], policy: 'cache_aware' | 'consistent_hash'): Promise<Router> {
  const [port, prom] = [await freePort(), await freePort()];
  return startGroup(`vllm-router (${policy})`, venvBin('vllm-router'), [
    '--host', '127.0.0.1', '--port', String(port), '--worker-urls', ...workers, '--policy', policy,
    '--prometheus-host', '127.0.0.1', '--prometheus-port', String(prom), '--log-level', 'warning',
  ], {}, 90_000, port);
}

/**
 * LiteLLM's proxy with one deployment per replica under the one model name the clients ask for,
 * its default routing (simple-shuffle), and its session affinity pre-call check: a request that
 * names a session (`x-litellm-session-id`) goes to the deployment that served that session before.
 */
export async function startLitellm(workers: readonly string[], model: string): Promise<Router> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-litellm-'));
  const key = `sk-warmroute-bench-${randomBytes(12).toString('hex')}`;
  const deployments = workers.map((w) => [
    `  - model_name: "${model}"`,
    '    litellm_params:',
    `      model: "hosted_vllm/${model}"`,
    `      api_base: "${w}/v1"`,
    '      api_key: "none"',
  ].join('\n'));
  writeFileSync(join(dir, 'config.yaml'), [
    'model_list:', ...deployments,
    'router_settings:',
    '  optional_pre_call_checks: ["session_affinity"]',
    'litellm_settings:',
    '  telemetry: false',
    // A master key, as the proxy wants outside local development; the bench sends it as a client would.
    'general_settings:',
    `  master_key: "${key}"`,
    '',
  ].join('\n'));
  return startGroup('litellm proxy', venvBin('litellm'), [
    '--config', join(dir, 'config.yaml'), '--host', '127.0.0.1', '--port', String(port), '--num_workers', '1',
  ], { LITELLM_LOG: 'ERROR', LITELLM_TELEMETRY: 'False', NO_DOCS: 'True' }, 120_000, port, { authorization: `Bearer ${key}` });
}

export function nginxBinary(): string {
  return process.env.WARMROUTE_NGINX ?? '/usr/sbin/nginx';
}

/** nginx as a platform team would put it in front of replicas for stickiness (bench/lib/nginx.ts). */
export async function startNginx(workers: readonly string[], header: string): Promise<Router> {
  const port = await freePort();
  const dir = nginxDir();
  writeFileSync(join(dir, 'nginx.conf'), nginxConf({ dir, port, upstreams: workers, hashHeader: header }));
  return startGroup('nginx', nginxBinary(), ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], {}, 20_000, port);
}
