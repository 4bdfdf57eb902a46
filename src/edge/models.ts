import type { Registry, ReplicaState } from '../fleet/registry.js';

/**
 * GET /v1/models: the union of what the healthy replicas serve, each model once (first replica's
 * entry wins). null when no replica is healthy.
 */
export function modelsBody(registry: Registry, managed: ManagedModels = NONE): string | null {
  const up = registry.replicas.filter((r) => r.up && !r.draining);
  if (up.length === 0) return null;
  const byId = new Map<string, unknown>();
  for (const r of up) {
    for (const m of r.modelEntries) {
      const id = (m as { id?: unknown }).id;
      if (typeof id === 'string' && !byId.has(id)) byId.set(id, m);
    }
  }
  const names = [...managed.clientNames.keys(), ...managed.sources];
  if (names.length > 0) {
    const base = baseModel(up, managed);
    for (const id of names) if (!byId.has(id)) byId.set(id, { id, object: 'model', created: 0, owned_by: 'warmroute', root: id, parent: base });
  }
  return JSON.stringify({ object: 'list', data: [...byId.values()] });
}

/** Model names the gateway itself answers for: client names of version rollouts, adapters it loads on demand. */
export interface ManagedModels {
  /** Client model name → its versions (adapters.versions). */
  readonly clientNames: ReadonlyMap<string, readonly string[]>;
  /** adapters.sources. */
  readonly sources: readonly string[];
}

const NONE: ManagedModels = { clientNames: new Map(), sources: [] };

/** The base model the managed adapters apply to: the parent of one of them where a replica lists it, else a LoRA replica's base model. */
function baseModel(up: readonly ReplicaState[], managed: ManagedModels): string | null {
  const wanted = new Set([...managed.sources, ...[...managed.clientNames.values()].flat()]);
  for (const r of up) for (const [a, parent] of r.adapters) if (wanted.has(a)) return parent;
  for (const r of up) {
    if (r.lora === null || r.lora.maxLoras === 0 || r.models === null) continue;
    for (const m of r.models) if (!r.adapters.has(m)) return m;
  }
  return null;
}
