import { withDefaults } from '../config/defaults.js';
import { routingOptionProblems } from '../config/load.js';
import { RoutingOptionsSchema, type RoutingOptions } from '../config/schema.js';

export type { RoutingOptions };

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };
export type RoutingOptionsInput = DeepPartial<RoutingOptions>;

/**
 * Routing knobs with the config schema's defaults filled in (the schema documents each one), checked
 * once at router creation. Throws with every problem at once.
 */
export function resolveRoutingOptions(input: RoutingOptionsInput = {}): RoutingOptions {
  const { value, problems } = withDefaults(RoutingOptionsSchema, input, 'routing option ');
  if (problems.length === 0) problems.push(...routingOptionProblems(value, 'routing option '));
  if (problems.length) throw new Error(problems.join('; '));
  return value;
}
