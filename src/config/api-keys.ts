import { readFileSync } from 'node:fs';
import { Type, type Static } from '@sinclair/typebox';
import { parse as parseYaml } from 'yaml';
import { withDefaults } from './defaults.js';
import { ApiKeySchema } from './schema.js';

export type ApiKeyEntry = Static<typeof ApiKeySchema>;

const KeyList = Type.Array(ApiKeySchema);

/** The client API keys in a YAML (or JSON) file: a list of { sha256, name, maxConcurrent }. Throws with every problem. */
export function readApiKeysFile(path: string): ApiKeyEntry[] {
  const doc = parseYaml(readFileSync(path, 'utf8')) as unknown;
  const { value, problems } = withDefaults(KeyList, doc ?? [], path);
  if (problems.length) throw new Error(`invalid API keys file: ${problems.join('; ')}`);
  return value;
}
