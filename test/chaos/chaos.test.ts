/**
 * The fault suite's short version (`npm run chaos` runs the full one): every fault, and no request
 * may end without the client knowing — completed, or an explicit error it can act on.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SCENARIOS } from '../../bench/chaos/scenarios.js';

/** What else each fault must show besides zero silent losses. */
const EXPECT: Record<string, (r: { sent: number; completed: number; explicit: number; notes: string[]; figures?: Record<string, number> }) => void> = {
  refused: (r) => assert.equal(r.completed, r.sent, 'a refused connection fails over'),
  'hang-before-headers': (r) => assert.ok(r.explicit > 0 && r.notes.some((n) => n.includes('504'))),
  'stall-mid-stream': (r) => assert.ok(r.explicit > 0 && r.notes.some((n) => n.includes('error event'))),
  'die-mid-stream': (r) => assert.ok(r.explicit > 0 && r.notes.some((n) => n.includes('error event'))),
  'die-mid-stream-resumed': (r) => assert.equal(r.completed, r.sent, 'every broken stream is resumed'),
  '503': (r) => assert.equal(r.completed, r.sent, 'a 503 before any byte is retried'),
  'all-down': (r) => assert.equal(r.explicit, r.sent),
  malformed: (r) => assert.equal(r.completed, 0, 'nothing malformed is passed on as an answer'),
  redis: (r) => assert.equal(r.completed, r.sent, 'routing goes on without Redis'),
  sigterm: (r) => assert.equal(r.completed, r.sent, 'live streams finish on SIGTERM'),
  'slow-reader': (r) => {
    assert.equal(r.completed, 1);
    // A 30 MB stream to a client that reads nothing: the replica is held back by what the sockets
    // buffer, and the gateway holds next to nothing.
    assert.ok(r.figures!.pausedWrittenMb < 20, `the replica wrote ${r.figures!.pausedWrittenMb.toFixed(1)} MB to a paused client`);
    assert.ok(r.figures!.peakRssMb < 64, `gateway RSS peaked ${r.figures!.peakRssMb.toFixed(0)} MB above its start`);
  },
  'many-streams': (r) => {
    assert.equal(r.completed, r.sent);
    assert.ok(r.figures!.afterMb - r.figures!.beforeMb < 64, 'memory comes back after the streams end');
  },
};

describe('fault suite (short): no silent losses', () => {
  for (const [name, run] of Object.entries(SCENARIOS)) {
    it(name, { timeout: 90_000 }, async () => {
      const row = await run('short');
      assert.equal(row.silent, 0, `${row.fault}: ${row.silent} silent losses (${row.notes.join('; ')})`);
      assert.equal(row.completed + row.explicit, row.sent);
      EXPECT[name]?.(row);
    });
  }
});
