import type { TSchema } from '@sinclair/typebox';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/value';
import { nearestName } from './nearest.js';

/**
 * One config problem in the user's words, naming its path: the allowed values of a choice, the
 * nearest valid name of a misspelled setting, what a URL must look like. TypeBox's own message
 * ("Expected union value", a regular expression) is the fallback, never the only text.
 */
export function describeProblem(e: ValueError, at = ''): string {
  const where = `${at}${e.path || (at ? '' : '/')}`;
  return `${where}: ${explain(e)}`;
}

function explain(e: ValueError): string {
  const got = shown(e.value);
  if (e.type === ValueErrorType.ObjectAdditionalProperties) {
    const name = e.path.split('/').pop() ?? '';
    const known = Object.keys((e.schema as { properties?: Record<string, unknown> }).properties ?? {});
    const near = nearestName(name, known);
    return near
      ? `unknown setting "${name}"; did you mean "${near}"?`
      : `unknown setting "${name}"; the settings here are ${known.join(', ')}`;
  }
  const hint = URL_HINTS.find((h) => h.path.test(e.path));
  if (hint && typeof e.value === 'string') return hint.explain(e.value);
  const choices = literalChoices(e.schema);
  if (choices) {
    const near = typeof e.value === 'string' ? nearestName(e.value, choices) : null;
    return `${got ?? 'this value'} is not one of ${choices.join(', ')}${near ? `; did you mean "${near}"?` : ''}`;
  }
  // A value of the wrong type: say what the setting takes, with its range.
  if (WRONG_TYPE.has(e.type)) return `expected ${describeSchema(e.schema)}${got ? ` (got ${got})` : ''}`;
  if (e.type === ValueErrorType.Union) {
    const members = ((e.schema as { anyOf?: TSchema[] }).anyOf ?? []).map(describeSchema);
    return `expected ${members.join(' or ')}${got ? ` (got ${got})` : ''}`;
  }
  return `${e.message}${got ? ` (got ${got})` : ''}`;
}

const WRONG_TYPE = new Set([ValueErrorType.Integer, ValueErrorType.Number, ValueErrorType.Boolean, ValueErrorType.String]);

/** The values a setting allows when it is a choice (a union of literals: `routing.strategy`), else null. */
export function literalChoices(schema: TSchema | undefined): string[] | null {
  const anyOf = schema?.anyOf as TSchema[] | undefined;
  if (!anyOf?.length || !anyOf.every((s) => 'const' in s)) return null;
  return anyOf.map((s) => String(s.const));
}

function describeSchema(s: TSchema): string {
  if ('const' in s) return JSON.stringify(s.const);
  const range = s.minimum !== undefined && s.maximum !== undefined ? ` ${s.minimum}–${s.maximum}` : s.minimum !== undefined ? ` ≥ ${s.minimum}` : '';
  switch (s.type) {
    case 'null': return 'null';
    case 'integer': return `an integer${range}`;
    case 'number': return `a number${range}`;
    case 'boolean': return 'true or false';
    case 'string': return s.minLength ? `a string of at least ${s.minLength} characters` : 'a string';
    default: return String(s.type ?? 'another shape');
  }
}

function shown(v: unknown): string | null {
  return v !== undefined && typeof v !== 'object' ? JSON.stringify(v) : null;
}

/** A URL setting's form in words, and the fix for the usual mistakes. */
const URL_HINTS: { path: RegExp; explain(got: string): string }[] = [
  {
    path: /^\/upstreams\/\d+\/url$/,
    explain(got) {
      const m = /^(https?|dns):\/\/([^/]+)(\/.+)$/.exec(got);
      if (m) return `drop "${m[3]}": an upstream is the replica's origin (${m[1]}://${m[2]}); the gateway forwards each /v1/... path as the client sent it (got ${JSON.stringify(got)})`;
      return `expected http://host:port, https://host:port or dns://name:port (got ${JSON.stringify(got)})`;
    },
  },
  {
    path: /^\/redis\/url$/,
    explain(got) {
      const fix = /^[^:/]+:\d+$/.test(got) ? `; for one server: redis://${got}` : '';
      return `expected redis://host:port, rediss://host:port, redis-sentinel://host:port,.../master or redis-cluster://host:port,... (got ${JSON.stringify(got)})${fix}`;
    },
  },
];
