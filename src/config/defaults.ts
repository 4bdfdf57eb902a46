import type { Static, TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { describeProblem } from './problems.js';

/**
 * A value with the schema's defaults filled in, and every problem with it, each naming its path
 * (prefixed with `at`). The input is not changed.
 */
export function withDefaults<T extends TSchema>(schema: T, input: unknown, at = ''): { value: Static<T>; problems: string[] } {
  const value = Value.Default(schema, structuredClone(input ?? {})) as Static<T>;
  const problems = [...Value.Errors(schema, value)].map((e) => describeProblem(e, at));
  return { value, problems };
}

/** The schema's defaults alone: what an empty section of the config file means. */
export function defaultsOf<T extends TSchema>(schema: T): Static<T> {
  return withDefaults(schema, {}).value;
}
