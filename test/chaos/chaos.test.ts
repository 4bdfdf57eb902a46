/**
 * The fault suite's short version (`npm run chaos` runs the full one, with the same checks): every
 * fault, and no request may end without the client knowing — completed, or an explicit error it
 * can act on — and each fault shows what its EXPECT entry (bench/chaos/scenarios.ts) says.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkRow, EXPECT, SCENARIOS, type ScenarioName } from '../../bench/chaos/scenarios.js';

describe('fault suite (short): no silent losses', () => {
  it('every scenario has its expectation, and no expectation is without a scenario', () => {
    assert.deepEqual(Object.keys(EXPECT).sort(), Object.keys(SCENARIOS).sort());
  });
  for (const name of Object.keys(SCENARIOS) as ScenarioName[]) {
    it(name, { timeout: 90_000 }, async () => {
      checkRow(name, await SCENARIOS[name]('short'));
    });
  }
});
