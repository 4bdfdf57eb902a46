// The Anthropic Python SDK through warmroute (test/python/anthropic_client.py): a keyed conversation
// streamed turn after turn on one replica (placed, then pinned), a whole message, a tool call the
// SDK assembles and the answer after its result on the same replica, a keyless conversation
// following its prefix, the gateway's 404 raised as the SDK's NotFoundError, count_tokens.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { SessionTagger } from '../../src/telemetry/session-tag.js';
import { startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { runPythonJson } from './python-json.js';

interface Fleet { urls: string[]; model: string; close(): Promise<void> }
interface Turn { pieces: number; text: string; stop: string; output_tokens: number; replica: string; route: string }

async function runPython(venv: string, script: string, args: string[]): Promise<{ out: any; stderr: string }> {
  const { lines, stderr } = await runPythonJson(join(venv, 'bin/python'), script, args);
  return { out: lines[0], stderr };
}

/** `noTools`: why these replicas cannot make a tool call (the tool step is then skipped, saying so); absent: they can. */
export function anthropicSuite(name: string, makeFleet: () => Promise<Fleet | string>, o: { venv: string; here: string; tagSecret: string; sessionTag: SessionTagger; skipWhenUnavailable: boolean; noTools?: string }): void {
  describe(`the Anthropic Python SDK through warmroute (${name})`, () => {
    let fleet: Fleet | undefined;
    let g: TestGateway | undefined;
    let unavailable: string | undefined;
    before(async () => {
      const f = await makeFleet();
      if (typeof f === 'string') { unavailable = f; return; }
      fleet = f;
      g = await startGateway(fleet.urls, { logging: { sessionTagSecret: o.tagSecret } });
    });
    after(async () => {
      await g?.close();
      await fleet?.close();
    });

    it('streams and not, tools, keyed and keyless conversations, errors and count_tokens', async (t) => {
      if (unavailable !== undefined) {
        if (o.skipWhenUnavailable) return t.skip(unavailable);
        assert.fail(unavailable);
      }
      const { out, stderr } = await runPython(o.venv, join(o.here, 'anthropic_client.py'), ['--base-url', g!.url, '--model', fleet!.model, '--turns', '3', ...(o.noTools ? ['--no-tools'] : [])]);
      t.diagnostic(`anthropic_client.py: ${JSON.stringify(out).slice(0, 600)}${stderr ? `\nstderr: ${stderr.slice(-1000)}` : ''}`);

      const streamed = out.streamed as Turn[];
      assert.equal(streamed.length, 3);
      for (const turn of streamed) {
        assert.ok(turn.pieces >= 2, `streamed in ${turn.pieces} piece(s)`);
        assert.ok(turn.text.length > 0);
        assert.ok(['end_turn', 'max_tokens'].includes(turn.stop), turn.stop);
        assert.ok(turn.output_tokens > 0);
      }
      assert.equal(new Set(streamed.map((x) => x.replica)).size, 1, 'a keyed conversation stays on one replica');
      assert.deepEqual(streamed.map((x) => x.route), ['placed', 'pinned', 'pinned']);
      assert.equal(out.whole.replica, streamed[0].replica, 'the whole message of the same session: its replica');
      assert.equal(out.whole.route, 'pinned');
      assert.ok(out.whole.text.length > 0);

      await t.test('a tool call the SDK assembles, and the answer after its result where the call ran', { skip: o.noTools ?? false }, () => {
        assert.equal(out.tools.stop, 'tool_use');
        assert.equal(out.tools.name, 'get_weather');
        assert.equal(typeof out.tools.input.city, 'string', 'the tool input assembled from input_json_delta');
        assert.equal(out.tools.answer.stop, 'end_turn');
        assert.equal(out.tools.answer.replica, out.tools.replica, 'the answer after the tool result runs where the call did');
      });

      const keyless = out.keyless as Turn[];
      assert.equal(new Set(keyless.map((x) => x.replica)).size, 1, 'a keyless conversation follows its prefix');
      assert.deepEqual(keyless.slice(1).map((x) => x.route), ['prefix', 'prefix']);

      assert.deepEqual(out.unknown_model, { raised: 'NotFoundError', status: 404, type: 'not_found_error' });
      assert.ok(out.count_tokens > 0);

      // What the gateway recorded of the keyed conversation: Messages streams, keyed by the header, complete.
      const tag = o.sessionTag(out.call);
      const mine = (ls: Record<string, any>[]) => ls.filter((l) => l.path === '/v1/messages' && l.session === tag);
      const lines = mine(await waitForAccess(g!, (ls) => mine(ls).length >= 5, 10_000));
      assert.deepEqual(lines.map((l) => l.status), [200, 200, 200, 200, 404], 'three streamed turns, a whole message, the unknown model');
      for (const l of lines.slice(0, 4)) {
        assert.equal(l.sessionSource, 'header:x-session-id');
        assert.equal(l.outcome, 'complete');
      }
      assert.deepEqual(lines.slice(0, 4).map((l) => l.stream), [true, true, true, false]);
    });
  });
}
