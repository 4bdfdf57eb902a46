/** Token counts a replica reported for one response. */
export interface Usage {
  promptTokens: number | null;
  completionTokens: number | null;
  cachedTokens: number | null;
}

const USAGE_AT = /"usage"\s*:\s*\{/g;

const KEYS = ['prompt_tokens', 'input_tokens', 'completion_tokens', 'output_tokens', 'cached_tokens', 'cache_read_input_tokens'] as const;
const COUNT = Object.fromEntries(KEYS.map((k) => [k, new RegExp(`"${k}"\\s*:\\s*(\\d+)`, 'g')])) as Record<(typeof KEYS)[number], RegExp>;

function count(text: string, from: number, key: (typeof KEYS)[number]): number | null {
  const re = COUNT[key];
  re.lastIndex = from;
  const hit = re.exec(text);
  return hit ? Number(hit[1]) : null;
}

/**
 * The usage object in a response's text (a JSON body, or one event's data), read with a few
 * regular expressions rather than a JSON.parse of the whole body. Chat and completions report
 * prompt/completion tokens, the Responses API and Anthropic Messages input/output tokens; the
 * cached ones are in `*_tokens_details.cached_tokens`, or Anthropic's `cache_read_input_tokens`
 * when the replica reports it. The last `"usage":{` wins (it is the response's own).
 */
export function usageIn(text: string): Usage | null {
  let at = -1;
  USAGE_AT.lastIndex = 0;
  for (let m = USAGE_AT.exec(text); m !== null; m = USAGE_AT.exec(text)) at = m.index;
  if (at < 0) return null;
  return {
    promptTokens: count(text, at, 'prompt_tokens') ?? count(text, at, 'input_tokens'),
    completionTokens: count(text, at, 'completion_tokens') ?? count(text, at, 'output_tokens'),
    cachedTokens: count(text, at, 'cached_tokens') ?? count(text, at, 'cache_read_input_tokens'),
  };
}
