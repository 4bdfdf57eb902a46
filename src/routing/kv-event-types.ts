/** vLLM's KV cache events, decoded (src/fleet/kv-events/decode.ts reads them off the wire). */
export type BlockKey = string;

export interface BlockStored {
  readonly type: 'stored';
  readonly hashes: readonly BlockKey[];
  readonly parent: BlockKey | null;
  /**
   * How many token ids the event carried (the ids themselves are not kept: routing learns blocks
   * from their place in the chain, not their tokens); null when absent.
   */
  readonly tokenCount: number | null;
  readonly blockSize: number | null;
  /** "GPU", "CPU" (offload tier), ...; null from releases that had one tier only. */
  readonly medium: string | null;
}

export interface BlockRemoved {
  readonly type: 'removed';
  readonly hashes: readonly BlockKey[];
  readonly medium: string | null;
}

export interface AllBlocksCleared {
  readonly type: 'cleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;
