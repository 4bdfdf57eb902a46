// LiveKit Agents for Node (@livekit/agents with @livekit/agents-plugin-openai), pointed at the
// gateway the way its docs point it at any OpenAI-compatible server: the plugin's LLM with a custom
// OpenAI client whose default headers carry the call's session key. Each call is a voice
// AgentSession driven by text turns (session.run, LiveKit's own test harness: no room, no audio),
// with a function tool, against simulated vLLM replicas. Every turn of a call must land on one replica.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { initializeLogger, llm, voice } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import OpenAI from 'openai';
import { z } from 'zod';
import { startFleet, type SimFleet } from '../../bench/sim/index.js';
import { startGateway, waitForAccess, type TestGateway } from '../helpers/gateway.js';
import { FAST } from '../sim/helpers.js';

const MODEL = 'google/gemma-4-31B-it';

class WeatherAgent extends voice.Agent {
  constructor() {
    super({
      instructions: 'You are the voice agent of a weather line. Answer in one short sentence.',
      tools: {
        get_weather: llm.tool({
          description: 'Current weather in a city',
          parameters: z.object({ city: z.string(), unit: z.string() }),
          execute: async ({ city }) => `Clear skies and 21 degrees in ${city}.`,
        }),
      },
    });
  }
}

/** One call: its own OpenAI client (session key as a default header), LLM and AgentSession. */
async function runCall(gatewayUrl: string, callId: string, utterances: string[]) {
  const seen: { replica: string | null; route: string | null }[] = [];
  const client = new OpenAI({
    baseURL: `${gatewayUrl}/v1`,
    apiKey: 'sk-unused',
    maxRetries: 0,
    defaultHeaders: { 'x-session-id': callId },
    // Records where each chat request went, from the gateway's response headers.
    fetch: async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith('/chat/completions')) seen.push({ replica: res.headers.get('x-warmroute-replica'), route: res.headers.get('x-warmroute-route') });
      return res;
    },
  });
  const session = new voice.AgentSession({ llm: new openai.LLM({ model: MODEL, client }) });
  await session.start({ agent: new WeatherAgent() });
  const turns: { events: string[]; text: string }[] = [];
  try {
    for (const userInput of utterances) {
      const result = await session.run({ userInput }).wait();
      turns.push({
        events: result.events.map((e) => e.type),
        text: result.events.flatMap((e) => (e.type === 'message' ? [e.item.textContent ?? ''] : [])).join(' '),
      });
    }
  } finally {
    await session.close();
  }
  return { seen, turns };
}

describe('LiveKit Agents (Node) through warmroute', () => {
  let fleet: SimFleet;
  let g: TestGateway;
  before(async () => {
    initializeLogger({ pretty: false, level: 'error' });
    fleet = await startFleet({ replicas: 4, ...FAST, outputTokens: { min: 8, max: 16 } });
    g = await startGateway(fleet.urls);
  });
  after(async () => {
    await g?.close();
    await fleet?.close();
  });

  it('two concurrent calls of several turns each, a tool call among them: every turn of a call on one replica', async () => {
    const utterances = ['Hi, is this the weather line?', 'Please call the weather tool for Lisbon.', 'Thanks. Anything else I should know?', 'Great, goodbye.'];
    const calls = await Promise.all(['call-a1b2', 'call-c3d4'].map((id) => runCall(g.url, id, utterances)));
    for (const { seen, turns } of calls) {
      assert.equal(turns.length, utterances.length);
      for (const t of turns) assert.ok(t.events.includes('message'), `every turn answers: ${t.events.join(',')}`);
      // The tool turn: the model called get_weather, the agent ran it and answered from its output.
      assert.deepEqual(turns[1].events, ['function_call', 'function_call_output', 'message']);
      // One chat request per turn, plus the follow-up after the tool result.
      assert.equal(seen.length, utterances.length + 1);
      assert.ok(seen.every((s) => s.replica), 'every response names its replica');
      assert.equal(new Set(seen.map((s) => s.replica)).size, 1, `one replica per call: ${JSON.stringify(seen)}`);
      assert.deepEqual(seen.map((s) => s.route), ['placed', ...Array(utterances.length).fill('pinned')]);
    }
    // The gateway saw the same: its access lines, one per request, each call's on one replica.
    const chats = (ls: Record<string, any>[]) => ls.filter((l) => l.path === '/v1/chat/completions');
    const access = chats(await waitForAccess(g, (ls) => chats(ls).length >= 2 * (utterances.length + 1)));
    assert.equal(access.length, 2 * (utterances.length + 1));
    const bySession = new Map<string, Set<string>>();
    for (const l of access) bySession.set(l.session, (bySession.get(l.session) ?? new Set()).add(l.replica));
    assert.equal(bySession.size, 2);
    for (const replicas of bySession.values()) assert.equal(replicas.size, 1);
  });
});
