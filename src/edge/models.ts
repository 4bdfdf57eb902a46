import type { Registry } from '../fleet/registry.js';

/**
 * GET /v1/models: the union of what the healthy replicas serve, each model once (first replica's
 * entry wins). null when no replica is healthy.
 */
export function modelsBody(registry: Registry): string | null {
  const up = registry.replicas.filter((r) => r.up && !r.draining);
  if (up.length === 0) return null;
  const byId = new Map<string, unknown>();
  for (const r of up) {
    for (const m of r.modelEntries) {
      const id = (m as { id?: unknown }).id;
      if (typeof id === 'string' && !byId.has(id)) byId.set(id, m);
    }
  }
  return JSON.stringify({ object: 'list', data: [...byId.values()] });
}
