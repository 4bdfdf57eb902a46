import type { Logger } from 'pino';
import type { ToolWatchMode } from '../stream/tool-calls.js';
import type { Metrics } from '../telemetry/metrics.js';

/** What the guard decided for one request: the fields to change and what the client is told. */
export interface ToolRequest {
  /** How its answer is checked for a cut tool call (stream/tool-calls.ts): tools offered, a call forced, or null (no tools). */
  readonly watch: ToolWatchMode | null;
  /** Fields to set in the body before it is forwarded (edge/body-fields.ts); null: the bytes go as received. */
  readonly fields: Record<string, unknown> | null;
  /** `x-warmroute-adjusted`'s value when a field was raised (`max_tokens=256`); null otherwise. */
  readonly adjusted: string | null;
}

export interface ToolGuard {
  /**
   * A chat (or Anthropic Messages, `api`) request as parsed: raised when it offers tools and asks
   * for fewer than `minTokens` tokens. `who(ctx)` names the caller (API key name or session tag)
   * for the once-per-caller warning, asked for only when a limit is raised (a function and its
   * argument, not a closure made for every request).
   */
  prepare<C>(parsed: Record<string, unknown>, minTokens: number, who: (ctx: C) => string, ctx: C, api?: ToolApi): ToolRequest;
}

const FIELDS = ['max_tokens', 'max_completion_tokens'] as const;
/** Callers already warned about; past this many the set starts again (a bound, not an LRU). */
const MAX_WARNED = 10_000;

/** Most requests: no tools, nothing to change or check. */
const NO_TOOLS: ToolRequest = Object.freeze({ watch: null, fields: null, adjusted: null });

const offersTools = (parsed: Record<string, unknown>) => Array.isArray(parsed.tools) && parsed.tools.length > 0;
/** Which API's fields the request uses: chat's `tool_choice` is a string or a named function, Anthropic's always an object with a `type`. */
export type ToolApi = 'chat' | 'messages';

/** tool_choice "required" or a named function (Anthropic: `any` or `tool`): the answer must be a call. */
function forcesCall(parsed: Record<string, unknown>, api: ToolApi): boolean {
  const choice = parsed.tool_choice;
  if (api === 'messages') {
    const type = typeof choice === 'object' && choice !== null ? (choice as Record<string, unknown>).type : undefined;
    return type === 'any' || type === 'tool';
  }
  return choice === 'required' || (typeof choice === 'object' && choice !== null);
}

/**
 * The prevention half of the tool-call guard: a turn that emits two parallel tool calls in 100
 * tokens has its second one cut mid-JSON, and the arguments come back as placeholders. A request
 * that offers tools with a token limit under tools.minMaxTokens is raised to it. Only such a request
 * is re-encoded; every other keeps the bytes it was sent with.
 */
export function createToolGuard(deps: { metrics: Metrics; log: Logger }): ToolGuard {
  const warned = new Set<string>();
  const raisedBy = Object.fromEntries(FIELDS.map((f) => [f, deps.metrics.toolMaxTokensRaised.labels(f)])) as Record<(typeof FIELDS)[number], { inc(): void }>;
  return {
    prepare(parsed, minTokens, who, ctx, api = 'chat') {
      if (!offersTools(parsed)) return NO_TOOLS;
      const watch: ToolWatchMode = forcesCall(parsed, api) ? 'forced' : 'offered';
      if (minTokens <= 0) return { watch, fields: null, adjusted: null };
      const low = FIELDS.filter((f) => typeof parsed[f] === 'number' && (parsed[f] as number) < minTokens);
      if (low.length === 0) return { watch, fields: null, adjusted: null };
      const raised: Record<string, unknown> = {};
      const was: Record<string, unknown> = {};
      for (const f of low) {
        was[f] = parsed[f];
        raised[f] = minTokens;
        raisedBy[f].inc();
      }
      const caller = who(ctx);
      if (!warned.has(caller)) {
        if (warned.size >= MAX_WARNED) warned.clear();
        warned.add(caller);
        deps.log.warn({ caller, asked: was, raisedTo: minTokens }, 'tool-call request asked for too few tokens: raised to tools.minMaxTokens (a tool call cut mid-JSON is worse than a longer answer); said once per caller');
      }
      return { watch, fields: raised, adjusted: low.map((f) => `${f}=${minTokens}`).join(', ') };
    },
  };
}
