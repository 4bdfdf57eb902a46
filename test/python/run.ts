// The Python voice-agent clients through warmroute: the OpenAI Python SDK (a client per call, and
// one shared client), LiveKit Agents' OpenAI plugin and Pipecat's OpenAILLMService (and the
// Anthropic Python SDK: anthropic-suite.ts), each built by
// its README snippet (test/python/clients.py runs them), a few concurrent multi-turn calls each,
// text only. Per call it checks what the client saw (every reply streamed in pieces) against what
// the gateway recorded: every turn an SSE stream ending in [DONE], the key arriving where the
// snippet puts it, every turn on one replica (placed, then pinned), and the admin API's pin for
// the call's id naming that replica.
//
//   npm run test:clients:py                      simulated replicas (bench/sim)
//   npm run test:clients:py -- --fleet vllm      the real fleet of ~/.cache/warmroute/fleet/vllm.json
//   npm run test:clients:py -- --fleet all       both; the real fleet only if it is up
//   (--state FILE names another state file; --calls N, --turns N)
//
// Not a *.test.ts file: npm test must not need Python. The venv is installed on first use
// (test/python/install.sh, outside the tree).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { after, before, describe, it, type TestContext } from 'node:test';
import { request } from 'undici';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { DEFAULT_MODEL } from '../../bench/sim/config.js';
import { createSessionTagger } from '../../src/telemetry/session-tag.js';
import { accessLines, startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';
import { anthropicSuite } from './anthropic-suite.js';
import { runPythonJson } from './python-json.js';

const HERE = new URL('.', import.meta.url).pathname;
// The gateway's session tags are keyed: the suite holds the key, so it can find each call's lines.
const TAG_SECRET = 'python-client-suite';
const sessionTag = createSessionTagger(TAG_SECRET);
const VENV = process.env.WARMROUTE_CLIENTS_VENV ?? join(homedir(), '.cache/warmroute/venv-clients');
const CLIENTS = ['openai-sdk', 'openai-sdk-shared', 'livekit', 'pipecat'] as const;
const { values: args } = parseArgs({
  options: {
    fleet: { type: 'string', default: 'sim' },
    // The real fleet's state file, as `npm run fleet:vllm` writes it.
    state: { type: 'string', default: join(homedir(), '.cache/warmroute/fleet/vllm.json') },
    calls: { type: 'string', default: '2' },
    turns: { type: 'string', default: '4' },
  },
  strict: false,
});
const CALLS = Number(args.calls);
const TURNS = Number(args.turns);
const VLLM_STATE = String(args.state);
if (!['sim', 'vllm', 'all'].includes(String(args.fleet))) throw new Error(`--fleet ${args.fleet}: expected sim, vllm or all`);

interface CallLine {
  client: string;
  callId: string;
  /** Where the snippet puts the key, as the access line names a source (header:x-session-id). */
  keySources: string[];
  turns?: { pieces: number; text: string }[];
  error?: string;
}

interface Fleet {
  urls: string[];
  model: string;
  close(): Promise<void>;
}

/** The real fleet's replicas and model, if its state file exists and every replica answers /health. */
async function realFleet(): Promise<Fleet | string> {
  if (!existsSync(VLLM_STATE)) return `no ${VLLM_STATE} (start one with npm run fleet:vllm)`;
  const state = JSON.parse(readFileSync(VLLM_STATE, 'utf8')) as { kind: string; model: string; replicas: { name: string; url: string }[] };
  for (const r of state.replicas) {
    const ok = await request(`${r.url}/health`, { headersTimeout: 3_000, bodyTimeout: 3_000 })
      .then(async (res) => (await res.body.dump(), res.statusCode === 200), () => false);
    if (!ok) return `replica ${r.name} of ${VLLM_STATE} does not answer /health`;
  }
  // Read-only: this suite never stops a fleet it did not start.
  return { urls: state.replicas.map((r) => r.url), model: state.model, close: async () => {} };
}

async function simFleet(): Promise<Fleet> {
  const f: SimFleet = await startFleet({ replicas: 3, ...FAST, outputTokens: { min: 8, max: 16 } });
  return { urls: f.urls, model: DEFAULT_MODEL, close: () => f.close() };
}

/** Runs one client's calls (clients.py under the venv's python); the JSON line of each call. */
async function runClient(client: string, baseUrl: string, model: string): Promise<{ calls: CallLine[]; stderr: string }> {
  const args = ['--base-url', `${baseUrl}/v1`, '--model', model, '--calls', String(CALLS), '--turns', String(TURNS), '--clients', client];
  const { lines, stderr } = await runPythonJson(join(VENV, 'bin/python'), join(HERE, 'clients.py'), args, { cwd: HERE, env: { OPENAI_API_KEY: 'unused' } });
  return { calls: lines as CallLine[], stderr };
}

async function pinnedReplica(g: TestGateway, key: string): Promise<string | null> {
  const res = await request(`${g.adminUrl}/admin/sessions/${encodeURIComponent(key)}`);
  const body = (await res.body.json()) as { replica?: string | null };
  return res.statusCode === 200 ? body.replica ?? null : null;
}

/** What the client saw of each call against what the gateway recorded of it. */
async function checkCalls(t: TestContext, g: TestGateway, client: string, calls: CallLine[]): Promise<void> {
  assert.equal(calls.length, CALLS, `one line per call: ${JSON.stringify(calls)}`);
  for (const call of calls) {
    assert.equal(call.error, undefined, `${call.callId} failed in the client: ${call.error}`);
    assert.equal(call.turns!.length, TURNS);
    call.turns!.forEach((turn, i) => {
      assert.ok(turn.pieces >= 2, `${call.callId} turn ${i + 1}: the client saw the reply in ${turn.pieces} piece(s), not streamed`);
      assert.ok(turn.text.length > 0, `${call.callId} turn ${i + 1}: empty reply`);
    });
    assert.equal(call.keySources.length, 1, `the ${client} snippet sends the call's id as its session key, once: ${call.keySources}`);

    const tag = sessionTag(call.callId);
    const mine = (lines: Record<string, any>[]) => lines.filter((l) => l.path === '/v1/chat/completions' && l.session === tag);
    const lines = mine(await waitForAccess(g, (ls) => mine(ls).length >= TURNS, 10_000));
    const where = lines.map((l) => `${l.route}@${l.replica}`).join(' ');
    assert.equal(lines.length, TURNS, `${call.callId}: one chat request per turn through the gateway, got ${where}`);
    for (const l of lines) {
      assert.equal(l.status, 200);
      assert.equal(l.sessionSource, call.keySources[0], `${call.callId}: the key reached warmroute where the snippet put it`);
      assert.equal(l.stream, true, `${call.callId}: the request asked for a stream`);
      assert.equal(l.done, true, `${call.callId}: the stream ended with [DONE]`);
      assert.equal(l.outcome, 'complete');
    }
    assert.equal(new Set(lines.map((l) => l.replica)).size, 1, `${call.callId}: every turn on one replica, got ${where}`);
    assert.deepEqual(lines.map((l) => l.route), ['placed', ...Array(TURNS - 1).fill('pinned')], `${call.callId}: placed once, then pinned: ${where}`);
    assert.equal(await pinnedReplica(g, call.callId), lines[0].replica, `${call.callId}: /admin/sessions names its replica`);
    t.diagnostic(`${call.callId}: ${TURNS} turns on ${lines[0].replica}, ${call.turns!.map((x) => x.pieces).join('/')} pieces, ttft ${lines.map((l) => l.ttftMs).join('/')} ms, cached ${lines.map((l) => l.cachedTokens ?? '-').join('/')} tokens`);
  }
  assert.equal(new Set(calls.map((c) => sessionTag(c.callId))).size, CALLS, 'each call its own session');
}

function suite(name: string, makeFleet: () => Promise<Fleet | string>): void {
  describe(`Python voice clients through warmroute (${name})`, () => {
    let fleet: Fleet | undefined;
    let g: TestGateway | undefined;
    let unavailable: string | undefined;
    before(async () => {
      const f = await makeFleet();
      if (typeof f === 'string') {
        unavailable = f;
        return;
      }
      fleet = f;
      g = await startGateway(fleet.urls, { logging: { sessionTagSecret: TAG_SECRET } });
    });
    after(async () => {
      await g?.close();
      await fleet?.close();
    });

    for (const client of CLIENTS) {
      it(`${client}: ${CALLS} concurrent calls of ${TURNS} turns, each streamed, keyed as the README says, on one replica`, async (t) => {
        if (unavailable !== undefined) {
          if (args.fleet === 'all') return t.skip(unavailable);
          assert.fail(unavailable);
        }
        const { calls, stderr } = await runClient(client, g!.url, fleet!.model);
        try {
          await checkCalls(t, g!, client, calls);
        } catch (e) {
          t.diagnostic(`clients.py stderr (tail):\n${stderr.slice(-3000)}`);
          throw e;
        }
      });
    }
    it('no request through the gateway failed', (t) => {
      if (unavailable !== undefined) return t.skip(unavailable);
      const bad = accessLines(g!.logs).filter((l) => l.status >= 400 || l.outcome !== 'complete');
      assert.deepEqual(bad.map((l) => `${l.method} ${l.path} ${l.status} ${l.outcome} ${l.err ?? ''}`), []);
    });
  });
}

before(() => {
  // Once per machine (skipped while the pinned requirements are unchanged).
  execFileSync('bash', [join(HERE, 'install.sh')], { stdio: ['ignore', 'inherit', 'inherit'] });
});
if (args.fleet !== 'vllm') suite('simulated vLLM replicas', simFleet);
if (args.fleet !== 'sim') suite('real fleet', realFleet);
const anthropic = { venv: VENV, here: HERE, tagSecret: TAG_SECRET, sessionTag, skipWhenUnavailable: args.fleet === 'all' };
if (args.fleet !== 'vllm') anthropicSuite('simulated vLLM replicas', simFleet, anthropic);
// Measured on vLLM 0.32 (CPU) with the fleet's random-weight model: tool_choice auto never makes a
// call; any or a named tool is refused without a tool-call parser, and with hermes the forced call's
// input is no JSON (the Messages endpoint answers 400, its stream an input_json_delta the SDK cannot
// parse), straight from the replica as through the gateway. The simulated fleet covers the tool step.
const NO_REAL_TOOLS = 'vLLM 0.32 makes no tool call with the fleet\'s random-weight model on /v1/messages';
if (args.fleet !== 'sim') anthropicSuite('real fleet', realFleet, { ...anthropic, noTools: NO_REAL_TOOLS });
