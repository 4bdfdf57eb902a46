import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerMessages, openingHistory, requestOf, type ChatMessage } from '../../bench/voice/conversation.js';
import { promptIds } from '../../bench/voice/ideal.js';
import { buildWorkload } from '../../bench/voice/workload.js';

test('the workload is deterministic in its seed', () => {
  const a = buildWorkload({ sessions: 20, turns: 5, seed: 7 });
  const b = buildWorkload({ sessions: 20, turns: 5, seed: 7 });
  const c = buildWorkload({ sessions: 20, turns: 5, seed: 8 });
  assert.deepEqual(a, b);
  assert.notDeepEqual(a.sessions, c.sessions);
});

test('keyless and body-key shares are exact; keys are unique', () => {
  const w = buildWorkload({ sessions: 50, keylessShare: 0.3, bodyKeyShare: 0.33 });
  const modes = w.sessions.map((s) => s.keyMode);
  assert.equal(modes.filter((m) => m === 'none').length, 15);
  assert.equal(modes.filter((m) => m === 'body').length, Math.round(35 * 0.33));
  assert.equal(new Set(w.sessions.map((s) => s.id)).size, 50);
  const none = buildWorkload({ sessions: 10, keylessShare: 0 });
  assert.ok(none.sessions.every((s) => s.keyMode !== 'none'));
});

test('system prompts are byte-stable per group, sized in range, shared by the group', () => {
  const w = buildWorkload({ sessions: 12, groups: 3, systemTokens: [2000, 6000] });
  for (const g of w.groups) {
    assert.ok(g.system.length >= 2000 * 4 && g.system.length <= 6000 * 4, `${g.system.length} chars`);
    assert.equal(g.tools.length, 3);
  }
  assert.equal(new Set(w.groups.map((g) => g.system)).size, 3);
  assert.deepEqual(w.sessions.map((s) => s.group), [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
});

test('tool turns name a tool of the session group; other utterances never trigger one', () => {
  const w = buildWorkload({ sessions: 30, turns: 10, toolTurnShare: 0.3 });
  let tools = 0;
  for (const s of w.sessions) {
    const names = w.groups[s.group].tools.map((t) => t.function.name);
    s.turns.forEach((t, i) => {
      if (t.tool) {
        tools++;
        assert.ok(i > 0);
        assert.ok(names.includes(t.tool));
        assert.ok(t.user.includes(`call ${t.tool}`));
      } else {
        assert.ok(!/\b(call|tool)/i.test(t.user), t.user); // the simulator's trigger
      }
    });
  }
  assert.ok(tools > 30 && tools < 130, `${tools} tool turns`);
});

test('the history grows byte-stably: turn n is a prefix of turn n+1, in bytes and in tokens', () => {
  const w = buildWorkload({ sessions: 1, turns: 4 });
  const s = w.sessions[0];
  const g = w.groups[s.group];
  const history: ChatMessage[] = openingHistory(g);
  const bodies: string[] = [];
  s.turns.forEach((t, i) => {
    history.push({ role: 'user', content: t.user });
    bodies.push(JSON.stringify(requestOf(s, g, history.slice()).body.messages));
    const call = i === 2 ? { id: 'chatcmpl-tool-abc', name: g.tools[0].function.name, arguments: '{"phone": "7"}' } : null;
    history.push(...answerMessages(` answer ${i}.`, call));
  });
  const tokens = bodies.map((b) => promptIds(JSON.parse(b) as ChatMessage[], g.tools));
  for (let i = 0; i + 1 < bodies.length; i++) {
    const a = JSON.parse(bodies[i]) as ChatMessage[];
    const b = JSON.parse(bodies[i + 1]) as ChatMessage[];
    assert.deepEqual(b.slice(0, a.length), a, `turn ${i} messages are a prefix of turn ${i + 1}`);
    // Tokens: everything but the generation prompt (the last 2-3 tokens) is a prefix.
    const cut = tokens[i].length - 3;
    assert.deepEqual(tokens[i + 1].slice(0, cut), tokens[i].slice(0, cut));
    assert.ok(tokens[i + 1].length > tokens[i].length);
  }
});

test('keys go where the plan says: header, body prompt_cache_key, or nowhere', () => {
  const w = buildWorkload({ sessions: 30 });
  for (const s of w.sessions) {
    const { headers, body } = requestOf(s, w.groups[s.group], []);
    assert.equal(headers['x-session-id'], s.keyMode === 'header' ? s.id : undefined);
    assert.equal(body.prompt_cache_key, s.keyMode === 'body' ? s.id : undefined);
    assert.deepEqual(body.stream_options, { include_usage: true });
  }
});
