import type { LoraSlots } from '../routing/types.js';
import { labelsOf } from './replica-config.js';

const list = (s: string | undefined): ReadonlySet<string> => new Set((s ?? '').split(',').map((x) => x.trim()).filter((x) => x !== ''));

/**
 * One sample of `vllm:lora_requests_info{max_lora, running_lora_adapters, waiting_lora_adapters}`.
 * vLLM sets the gauge to the time of each reading and never removes a label set it had before, so
 * the caller keeps the sample with the largest value: the replica's state now. null when the
 * sample does not say how many slots there are.
 */
export function loraSlotsOf(labels: string): LoraSlots | null {
  const l = labelsOf(labels);
  const maxLoras = Number(l.max_lora);
  if (!Number.isInteger(maxLoras) || maxLoras < 0) return null;
  return { maxLoras, running: list(l.running_lora_adapters), waiting: list(l.waiting_lora_adapters) };
}

/** The adapters among a replica's /v1/models entries (those with a `parent`): adapter → its base model. */
export function adaptersOf(entries: readonly unknown[]): ReadonlyMap<string, string> {
  const out = new Map<string, string>();
  for (const m of entries) {
    const { id, parent } = (m ?? {}) as { id?: unknown; parent?: unknown };
    if (typeof id === 'string' && typeof parent === 'string' && parent !== '' && parent !== id) out.set(id, parent);
  }
  return out;
}
