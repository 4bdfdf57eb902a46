// The realtime tap reads a frame's event type from its ends, never parsing the audio, and times utterances.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventType, UtteranceTap } from '../../src/stream/realtime-tap.js';

const b = (s: string) => Buffer.from(s);

describe('realtime tap', () => {
  it('reads the type at the start, at the end, or of a small frame parsed whole', () => {
    const audio = 'A'.repeat(4000);
    assert.equal(eventType(b('{"type":"transcription.delta","delta":" hi"}')), 'transcription.delta');
    assert.equal(eventType(b(`{"type": "input_audio_buffer.append", "audio":"${audio}"}`)), 'input_audio_buffer.append');
    assert.equal(eventType(b(`{"audio":"${audio}","type":"input_audio_buffer.append"}`)), 'input_audio_buffer.append');
    assert.equal(eventType(b(`{"final":true,${' '.repeat(80)}"type":"input_audio_buffer.commit" ,"x":1${' '.repeat(80)}}`)), 'input_audio_buffer.commit');
    assert.equal(eventType(b(`{"audio":"${audio}","type":"input_audio_buffer.commit","pad":"${audio}"}`)), null, 'a large frame with its type in the middle is not parsed');
    assert.equal(eventType(b('{"text":"he said \\"type\\":\\"error\\"","type":"transcription.done"}')), 'transcription.done', 'an escaped "type" inside a string is not the key');
    assert.equal(eventType(b('not json')), null);
    assert.equal(eventType(b('')), null);
  });

  it('times an utterance from its first commit to its first delta, and from its last commit to done', () => {
    const t = new UtteranceTap();
    assert.equal(t.delta(1), false, 'no utterance open');
    assert.equal(t.done(2), null);
    t.commit(10);
    t.commit(15);
    assert.equal(t.delta(40), true);
    assert.equal(t.delta(50), false, 'only the first');
    t.commit(90);
    assert.deepEqual(t.done(120), { started: 10, firstDelta: 40, lastCommit: 90, done: 120 });
    assert.equal(t.count, 1);
    t.commit(200);
    assert.deepEqual(t.done(260), { started: 200, firstDelta: 0, lastCommit: 200, done: 260 }, 'no delta came');
  });
});
