// docs/configuration.md lists every config key, flag and environment variable the gateway reads.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { SERVE_FLAGS } from '../../src/config/flags.js';
import { BEGIN, END, PAGE, configRows, pageWithReference, schemaKeys } from './config-reference.js';

const page = readFileSync(PAGE, 'utf8');

describe('docs/configuration.md', () => {
  it('holds the reference generated from the schema, as it is now (npx tsx test/ship/config-reference.ts --write)', () => {
    assert.ok(page.includes(BEGIN) && page.includes(END), 'the generated-reference markers');
    assert.equal(page, pageWithReference(page), 'the generated part is stale: rerun the generator');
  });

  it('has a row for every key of the schema, nested and list keys included', () => {
    const keys = schemaKeys().map((k) => k.path);
    for (const path of ['upstreams[].url', 'routing.options.loadFactor', 'responses.onLostState', 'auth.apiKeys[].sha256', 'redis.url']) {
      assert.ok(keys.includes(path), `${path} found by the schema walk`);
    }
    for (const path of keys) assert.ok(page.includes(`| \`${path}\` |`), `${path} has a row`);
    const rows = configRows();
    assert.equal(rows.find((r) => r.path === 'routing.options.loadFactor')?.default, '`1.25`');
    assert.match(rows.find((r) => r.path === 'responses.fetchMs')?.text ?? '', /shared store/, "a named sub-schema's comments are found");
  });

  it('names every flag of warmroute serve and every WARMROUTE_* variable', () => {
    // The one list of serve's flags and their variables (src/config/flags.ts), the one the CLI parses.
    assert.ok(SERVE_FLAGS.some((f) => f.env === 'WARMROUTE_UPSTREAM') && SERVE_FLAGS.some((f) => f.env === 'WARMROUTE_ADMIN_TOKEN'));
    for (const spec of SERVE_FLAGS) {
      if ('flag' in spec) assert.match(page, new RegExp(`\`--${spec.flag}[ \`]`), `--${spec.flag} is listed`);
      assert.ok(page.includes(`\`${spec.env}\``), `${spec.env} is listed`);
    }
  });
});
