import { spawn } from 'node:child_process';
import { homedir } from 'node:os';

/**
 * Runs a Python script and collects the JSON lines it prints (each line that starts with `{`), in
 * a bare environment (PATH, HOME and `env`): no key or proxy setting of the caller's reaches the
 * clients. Rejects with the end of its stderr when it prints none.
 */
export function runPythonJson(python: string, script: string, args: readonly string[], o: { cwd?: string; env?: Record<string, string> } = {}): Promise<{ lines: unknown[]; stderr: string }> {
  const py = spawn(python, [script, ...args], { cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', HOME: homedir(), ...o.env } });
  let out = '';
  let err = '';
  py.stdout.on('data', (d) => (out += d));
  py.stderr.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    py.on('error', reject);
    py.on('close', (code) => {
      const lines = out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as unknown);
      if (lines.length === 0) reject(new Error(`${script} ${args.join(' ')} exited ${code} with no result; stderr:\n${err.slice(-4000)}`));
      else resolve({ lines, stderr: err });
    });
  });
}
