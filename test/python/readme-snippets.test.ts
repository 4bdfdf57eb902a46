// Without Python: the README still has the Python snippets the client suite runs (npm run
// test:clients:py, test/python/run.ts), under the labels test/python/readme_snippets.py looks
// for, each pointing at the placeholder address the suite replaces and sending the call's id as
// its session key.
// Renaming a label or dropping a block would otherwise only show when someone runs that suite.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

const readme = readFileSync('README.md', 'utf8');
const finder = readFileSync('test/python/readme_snippets.py', 'utf8');

function pythonConstant(name: string): string {
  const m = new RegExp(`^${name} = "([^"]+)"$`, 'm').exec(finder);
  assert.ok(m, `${name} in readme_snippets.py`);
  return m[1];
}

describe("the README's Python client snippets", () => {
  const section = pythonConstant('SECTION');
  const placeholder = pythonConstant('PLACEHOLDER_URL');
  const labelsBlock = /^LABELS = \{\n([\s\S]*?)^\}/m.exec(finder)?.[1] ?? '';
  const labels = [...labelsBlock.matchAll(/^\s+"([^"]+)": "([a-z-]+)",$/gm)].map((m) => m[1]);
  const start = readme.indexOf(`${section}\n`);
  const end = readme.indexOf('\n## ', start + section.length);
  const text = readme.slice(start, end === -1 ? undefined : end);

  it('are in their section, one block under each label the suite looks for', () => {
    assert.ok(start >= 0, `README has ${section}`);
    assert.deepEqual(labels, ['OpenAI SDK, Python', 'OpenAI SDK, Python, one client for every call', 'LiveKit Agents, Python', 'Pipecat']);
    const parts = text.split(/^(?=\*\*[^*]+\*\*)/m);
    for (const label of labels) {
      const part = parts.find((p) => p.startsWith(`**${label}**`));
      assert.ok(part, `a **${label}** paragraph`);
      const code = /^```python\n([\s\S]*?)^```$/m.exec(part)?.[1];
      assert.ok(code, `a python block under **${label}**`);
      assert.ok(code.includes(`"${placeholder}"`), `the ${label} snippet points at ${placeholder}`);
      assert.match(code.split('\n#')[0], /"x-session-id":\s*call_id|prompt_cache_key=call_id/, `the ${label} snippet sends the call's id as its session key`);
    }
  });

  it('name the suite that runs them, which is an npm script', () => {
    assert.match(text, /npm run test:clients:py/);
    const scripts = JSON.parse(readFileSync('package.json', 'utf8')).scripts as Record<string, string>;
    assert.match(scripts['test:clients:py'] ?? '', /test\/python\/run\.ts/);
  });
});
