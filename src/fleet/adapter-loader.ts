import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { AdaptersConfig } from '../config/schema.js';
import { errors } from '../errors.js';
import type { ReplicaView } from '../routing/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Registry, ReplicaState } from './registry.js';

/** Counts of a managed adapter's exchanges per replica: what protects it from an unload (upstream/exchange.ts holds them). */
export interface AdapterHolds {
  hold(replica: string, adapter: string): void;
  release(replica: string, adapter: string): void;
}

/** One load or unload the gateway made, as a request's trace and access line tell it. */
export interface AdapterChange {
  readonly kind: 'load' | 'unload';
  readonly replica: string;
  readonly adapter: string;
  /** loaded, failed, timeout; unloaded, failed. */
  readonly outcome: string;
  readonly ms: number;
}

/** What /admin/replicas shows of the adapters the gateway manages on one replica. */
export interface ManagedAdapterView {
  readonly adapter: string;
  readonly loaded: boolean;
  readonly loading: boolean;
  readonly unloading: boolean;
  /** Exchanges of it open on the replica through this gateway. */
  readonly inflight: number;
  /** Its last use there by this gateway or, with a shared store, any gateway (lastUse): what the unload order reads. */
  readonly lastUsedAt: string | null;
}

export interface AdapterLoader {
  /** Whether the gateway may load and unload `model`: one of adapters.sources. */
  manages(model: string | null): model is string;
  /**
   * For a request naming one of adapters.sources: the replicas that could hold it (routing places
   * the request among them, where it is loaded while its traffic fits there), or, while it loads
   * on some and none lists it yet, those only. null when the model is not a source, or when only
   * replicas that cannot load adapters list it. Throws 503 adapter_unavailable (counted) when no
   * replica could take it.
   */
  loadable(model: string | null, replicas: readonly ReplicaView[]): ((r: ReplicaView) => boolean) | null;
  /**
   * Makes sure `adapter` is loaded on `r`: one POST /v1/load_lora_adapter per adapter and replica
   * at a time, however many requests wait for it, bounded by adapters.loadTimeoutMs; room is made
   * first (adapters.maxLoadedPerReplica). Resolves with the load this request waited for (null
   * when there was none to make); rejects with a 502 adapter_load_failed naming the replica's reason.
   */
  ensure(r: ReplicaState, adapter: string): Promise<AdapterChange | null>;
  /**
   * `r` answered 404 for `adapter`, routed there as loaded: its list is read again, and the
   * adapter loaded there again unless the replica lists it (as ensure()). Warned about.
   */
  regain(r: ReplicaState, adapter: string): Promise<AdapterChange | null>;
  /** The exchanges' in-flight counts (upstream/exchange.ts holds them). */
  readonly holds: AdapterHolds;
  view(replica: string): readonly ManagedAdapterView[];
  /** The adapters it may load (adapters.sources). */
  sources(): readonly string[];
  setOptions(o: AdaptersConfig): void;
}

export interface AdapterLoaderDeps {
  readonly registry: Registry;
  readonly agent: Dispatcher;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly options: AdaptersConfig;
  /** Reads the replica's /v1/models again (fleet/health.ts); false when it could not. */
  readonly readModels: (r: ReplicaState) => Promise<boolean>;
  /**
   * When any gateway sharing this one's store last routed a request for the adapter to the
   * replica (Router.adapterSentAt): the least recently used adapter is the fleet's, not this
   * gateway's alone. Absent: this gateway's own use.
   */
  readonly sentAt?: (replica: string, adapter: string) => number | null;
}

/** A replica that could take an adapter: it takes traffic and reports LoRA slots, or lists adapters already. */
const loraOn = (r: ReplicaView) => r.up && !r.draining && ((r.lora != null && r.lora.maxLoras > 0) || (r.adapters !== undefined && r.adapters.size > 0));

/** The error text of a vLLM answer (`{"error":{"message"}}` or `{"message"}`), else the body, bounded. */
function reasonOf(status: number, text: string): string {
  let msg = text;
  try {
    const j = JSON.parse(text) as { error?: { message?: unknown }; message?: unknown };
    const m = j.error?.message ?? j.message;
    if (typeof m === 'string') msg = m;
  } catch { /* a plain-text answer is its own reason */ }
  msg = msg.replace(/\s+/g, ' ').trim();
  return `answered ${status}${msg ? `: ${msg.slice(0, 300)}` : ''}`;
}

/**
 * On-demand LoRA adapters (adapters.sources): loads an adapter where routing placed a request that
 * no replica could serve yet, unloads the least recently used idle one to stay within
 * adapters.maxLoadedPerReplica, and re-reads the replica's adapter list after each. A load or an
 * unload that fails leaves the gateway's view as the replica reports it afterwards: nothing is
 * believed loaded that the replica did not confirm.
 */
export function createAdapterLoader(deps: AdapterLoaderDeps): AdapterLoader {
  const { registry, agent, metrics, log, readModels } = deps;
  let o = deps.options;
  for (const outcome of ['loaded', 'failed', 'timeout', 'no_replica']) metrics.adapterLoads.inc({ outcome }, 0);
  for (const outcome of ['unloaded', 'failed', 'none_idle']) metrics.adapterUnloads.inc({ outcome }, 0);
  const key = (replica: string, adapter: string) => `${replica}\n${adapter}`;
  const loading = new Map<string, Promise<AdapterChange | null>>();
  const unloading = new Map<string, Promise<void>>();
  // Per replica: each managed adapter's open exchanges, and when it was last used.
  const inflight = new Map<string, Map<string, number>>();
  const lastUsed = new Map<string, Map<string, number>>();
  // The base model each adapter was last listed under: a load goes to a replica serving it.
  const baseOf = new Map<string, string>();

  const inner = <V>(m: Map<string, Map<string, V>>, replica: string) => {
    let x = m.get(replica);
    if (x === undefined) m.set(replica, (x = new Map()));
    return x;
  };
  /** When it was last used on the replica: by this gateway, or by any gateway sharing its store (0: never known). */
  const lastUse = (replica: string, adapter: string) => Math.max(lastUsed.get(replica)?.get(adapter) ?? 0, deps.sentAt?.(replica, adapter) ?? 0);
  const inUse = (replica: string, adapter: string) => (inflight.get(replica)?.get(adapter) ?? 0) > 0 || loading.has(key(replica, adapter));
  const touch = (replica: string, adapter: string) => {
    inner(lastUsed, replica).set(adapter, Date.now());
    // Replicas that left the fleet (a dns:// upstream's addresses come and go) are forgotten here.
    if (lastUsed.size > registry.replicas.length * 2 + 8) for (const name of lastUsed.keys()) if (registry.byName(name) === undefined) { lastUsed.delete(name); inflight.delete(name); }
  };

  // Adapters already warned about: once each (bounded by adapters.sources).
  const warnedBase = new Set<string>();
  /**
   * An adapter of unknown base on a fleet whose LoRA replicas serve several base models could be
   * loaded where it does not apply: counted and warned (once per adapter), not refused.
   */
  function guessedBase(adapter: string, replicas: readonly ReplicaView[]) {
    const bases = new Set<string>();
    for (const r of replicas) {
      if (!loraOn(r)) continue;
      for (const m of r.models ?? []) if (!r.adapters?.has(m)) bases.add(m);
    }
    if (bases.size < 2) return;
    metrics.adapterBaseUnknown.inc();
    if (warnedBase.has(adapter)) return;
    warnedBase.add(adapter);
    log.warn({ adapter, bases: [...bases] }, 'adapter of unknown base model on a fleet serving several: it may be loaded on a replica of another base (set adapters.bases)');
  }

  function post(r: ReplicaState, path: string, body: object): Promise<Dispatcher.ResponseData> {
    const ms = o.loadTimeoutMs;
    return agent.request({
      origin: r.origin, path, method: 'POST',
      headers: { 'content-type': 'application/json', ...(r.apiKey ? { authorization: `Bearer ${r.apiKey}` } : {}) },
      body: JSON.stringify(body), headersTimeout: ms, bodyTimeout: ms, signal: AbortSignal.timeout(ms),
    });
  }

  /** The gateway's view of `r` without `adapter`, at once: no request is routed to it while it goes. */
  function dropLocally(r: ReplicaState, adapter: string) {
    const next = new Map(r.adapters);
    next.delete(adapter);
    r.adapters = next;
    r.models?.delete(adapter);
    r.modelEntries = r.modelEntries.filter((m) => (m as { id?: unknown }).id !== adapter);
  }

  /** The replica confirmed a load but its list could not be read: its answer is believed until the next check. */
  function addLocally(r: ReplicaState, adapter: string) {
    const base = baseOf.get(adapter) ?? [...r.adapters.values()][0] ?? [...(r.models ?? [])][0] ?? '';
    r.adapters = new Map([...r.adapters, [adapter, base]]);
    r.models?.add(adapter);
    r.modelEntries = [...r.modelEntries, { id: adapter, object: 'model', owned_by: 'vllm', root: o.sources[adapter], parent: base }];
  }

  async function unload(r: ReplicaState, adapter: string): Promise<void> {
    const k = key(r.name, adapter);
    dropLocally(r, adapter);
    const started = performance.now();
    let outcome = 'unloaded';
    let reason: string | null = null;
    try {
      const res = await post(r, '/v1/unload_lora_adapter', { lora_name: adapter });
      const text = await res.body.text();
      // Already gone (another gateway unloaded it): what was wanted.
      if (res.statusCode >= 300 && res.statusCode !== 404) {
        outcome = 'failed';
        reason = reasonOf(res.statusCode, text);
      }
    } catch (e) {
      outcome = 'failed';
      reason = (e as Error).name === 'TimeoutError' ? `no answer within ${o.loadTimeoutMs} ms` : (e as Error).message;
    }
    metrics.adapterUnloads.inc({ outcome });
    const ms = Math.round(performance.now() - started);
    if (outcome === 'unloaded') {
      lastUsed.get(r.name)?.delete(adapter);
      log.info({ replica: r.name, adapter, ms }, 'adapter unloaded: the least recently used idle one, to stay within adapters.maxLoadedPerReplica');
    } else {
      log.warn({ replica: r.name, adapter, ms, reason }, 'adapter unload failed: the replica keeps it, past adapters.maxLoadedPerReplica');
    }
    await readModels(r);
    unloading.delete(k);
  }

  /** Unloads the least recently used idle managed adapters of `r` until one more fits under the bound. */
  async function makeRoom(r: ReplicaState, adapter: string): Promise<void> {
    const max = o.maxLoadedPerReplica;
    if (max === 0) return;
    const othersLoading = () => {
      let n = 0;
      for (const k of loading.keys()) if (k.startsWith(`${r.name}\n`) && k !== key(r.name, adapter)) n++;
      return n;
    };
    for (let guard = 0; guard < 16 && r.adapters.size + othersLoading() + 1 > max; guard++) {
      let victim: string | null = null;
      let oldest = Infinity;
      for (const a of r.adapters.keys()) {
        if (!(a in o.sources) || a === adapter || inUse(r.name, a) || unloading.has(key(r.name, a))) continue;
        const at = lastUse(r.name, a);
        if (at < oldest) { oldest = at; victim = a; }
      }
      if (victim === null) {
        metrics.adapterUnloads.inc({ outcome: 'none_idle' });
        log.warn({ replica: r.name, adapter, loaded: r.adapters.size, max }, 'adapter loaded past adapters.maxLoadedPerReplica: every adapter there the gateway may unload has requests in flight');
        return;
      }
      const p = unload(r, victim);
      unloading.set(key(r.name, victim), p);
      await p;
    }
  }

  async function load(r: ReplicaState, adapter: string): Promise<AdapterChange | null> {
    // An unload of it there still under way finishes first: the two must not cross at the replica.
    await unloading.get(key(r.name, adapter));
    if (r.adapters.has(adapter)) return null;
    await makeRoom(r, adapter);
    const started = performance.now();
    let outcome = 'loaded';
    let reason = '';
    try {
      const res = await post(r, '/v1/load_lora_adapter', { lora_name: adapter, lora_path: o.sources[adapter] });
      const text = await res.body.text();
      // Loaded meanwhile by someone else (another gateway): there, as wanted.
      if (res.statusCode >= 300 && !(res.statusCode === 400 && /already been loaded/i.test(text))) {
        outcome = 'failed';
        reason = reasonOf(res.statusCode, text);
      }
    } catch (e) {
      const timedOut = (e as Error).name === 'TimeoutError' || (e as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT';
      outcome = timedOut ? 'timeout' : 'failed';
      reason = timedOut ? `no answer within ${o.loadTimeoutMs} ms (adapters.loadTimeoutMs)` : (e as Error).message;
    }
    const ms = Math.round(performance.now() - started);
    metrics.adapterLoads.inc({ outcome });
    metrics.adapterLoadDuration.observe({ outcome }, ms / 1000);
    // What the replica holds now, whatever the answer was (a load that timed out may still land).
    const listed = await readModels(r);
    if (outcome !== 'loaded') {
      log.warn({ replica: r.name, adapter, ms, outcome, reason }, 'adapter load failed: the requests waiting for it get a 502');
      throw errors.adapterLoadFailed([r.name, adapter, reason]);
    }
    if (!listed || !r.adapters.has(adapter)) addLocally(r, adapter);
    const base = r.adapters.get(adapter);
    if (base) baseOf.set(adapter, base);
    touch(r.name, adapter);
    log.info({ replica: r.name, adapter, ms }, 'adapter loaded on demand');
    return { kind: 'load', replica: r.name, adapter, outcome, ms };
  }

  function ensure(r: ReplicaState, adapter: string): Promise<AdapterChange | null> {
    const k = key(r.name, adapter);
    let p = loading.get(k);
    if (p === undefined) {
      p = load(r, adapter).finally(() => loading.delete(k));
      loading.set(k, p);
    }
    return p;
  }

  return {
    manages: (model): model is string => model !== null && Object.hasOwn(o.sources, model),
    loadable(model, replicas) {
      if (model === null || !Object.hasOwn(o.sources, model)) return null;
      // Its base: as configured, else as a replica lists it (its `parent`), else as it was last loaded.
      let base = Object.hasOwn(o.bases, model) ? o.bases[model] : undefined;
      let listed = false;
      for (const r of replicas) {
        const parent = r.adapters?.get(model);
        if (parent === undefined) continue;
        base ??= parent;
        if (r.up && !r.draining) listed = true;
      }
      base ??= baseOf.get(model);
      if (base === undefined) guessedBase(model, replicas);
      const can = (r: ReplicaView) => loraOn(r) && (base === undefined || r.models === null || r.models.has(base));
      if (!listed) {
        // Requests that come while it loads somewhere join that load rather than start one more
        // elsewhere: one load however many first requests there are.
        const joining = replicas.filter((r) => can(r) && loading.has(key(r.name, model)));
        if (joining.length > 0) return (r) => joining.includes(r);
      }
      if (!replicas.some(can)) {
        if (listed) return null;
        metrics.adapterLoads.inc({ outcome: 'no_replica' });
        log.warn({ adapter: model }, 'adapter not loadable: no replica that takes traffic has LoRA enabled (vllm:lora_requests_info) for its base model');
        throw errors.adapterUnavailable([model, 'no replica that takes traffic has LoRA enabled for its base model'], 'model');
      }
      // Loaded somewhere or not, every replica that could hold it is a candidate: placement keeps
      // it where it is loaded while its traffic fits there and loads it on one more when not.
      return can;
    },
    ensure,
    async regain(r, adapter) {
      log.warn({ replica: r.name, adapter }, 'adapter gone from the replica it was routed to (unloaded by another gateway, or the replica restarted): loaded there again and the request sent again');
      // The replica's own word wins over the view the 404 contradicted; without it, the 404's.
      if (!(await readModels(r))) dropLocally(r, adapter);
      return ensure(r, adapter);
    },
    holds: {
      hold(replica, adapter) {
        const m = inner(inflight, replica);
        m.set(adapter, (m.get(adapter) ?? 0) + 1);
        touch(replica, adapter);
      },
      release(replica, adapter) {
        const m = inflight.get(replica);
        const n = (m?.get(adapter) ?? 0) - 1;
        if (n > 0) m!.set(adapter, n);
        else m?.delete(adapter);
        touch(replica, adapter);
      },
    },
    view(replica) {
      const r = registry.byName(replica);
      const out: ManagedAdapterView[] = [];
      for (const adapter of Object.keys(o.sources)) {
        const used = lastUse(replica, adapter);
        const v = {
          adapter,
          loaded: r?.adapters.has(adapter) ?? false,
          loading: loading.has(key(replica, adapter)),
          unloading: unloading.has(key(replica, adapter)),
          inflight: inflight.get(replica)?.get(adapter) ?? 0,
          lastUsedAt: used > 0 ? new Date(used).toISOString() : null,
        };
        if (v.loaded || v.loading || v.unloading || v.inflight > 0) out.push(v);
      }
      return out;
    },
    sources: () => Object.keys(o.sources),
    setOptions(next) { o = next; },
  };
}
