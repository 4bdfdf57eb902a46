// The Dockerfile as data, through dockerfile-ast (the parser behind the Docker language server):
// stages with their base image (global ARGs resolved), instructions, and the exec-form arrays of
// ENTRYPOINT, CMD and HEALTHCHECK. No container engine runs in CI, so the tests read these instead.

import { readFileSync } from 'node:fs';
import { DockerfileParser, ModifiableInstruction, type Instruction } from 'dockerfile-ast';

export interface Stage {
  /** `AS name`, or null for an unnamed stage. */
  name: string | null;
  /** The base image with global ARGs resolved, e.g. node:24.21.0-bookworm-slim. */
  image: string;
  instructions: Step[];
}

/** One instruction: its flags (--from=build, --interval=10s ...) apart from its arguments. */
export interface Step {
  keyword: string;
  flags: Record<string, string>;
  args: string;
}

export interface ParsedDockerfile {
  text: string;
  stages: Stage[];
  final: Stage;
}

/** `${NAME}` and `$NAME` from the ARGs declared before the first FROM (the only ones FROM sees). */
function resolveGlobalArgs(s: string, args: Map<string, string>): string {
  return s.replace(/\$\{(\w+)\}|\$(\w+)/g, (m, a: string | undefined, b: string | undefined) => args.get((a ?? b)!) ?? m);
}

export function parseDockerfile(path: string): ParsedDockerfile {
  const text = readFileSync(path, 'utf8');
  const df = DockerfileParser.parse(text);
  const globals = new Map<string, string>();
  for (const arg of df.getInitialARGs()) {
    const p = arg.getProperty();
    const name = p?.getName();
    const value = p?.getValue();
    if (name && value !== null && value !== undefined) globals.set(name, value);
  }
  const stages: Stage[] = [];
  for (const ins of df.getInstructions() as Instruction[]) {
    const keyword = ins.getKeyword().toUpperCase();
    const args = ins.getArgumentsContent() ?? '';
    if (keyword === 'FROM') {
      const [image, as, name] = args.trim().split(/\s+/);
      stages.push({ name: as?.toUpperCase() === 'AS' ? name : null, image: resolveGlobalArgs(image, globals), instructions: [] });
    } else if (stages.length) {
      const flags = ins instanceof ModifiableInstruction
        ? Object.fromEntries(ins.getFlags().map((f) => [f.getName(), f.getValue() ?? '']))
        : {};
      stages[stages.length - 1].instructions.push({ keyword, flags, args });
    }
  }
  if (!stages.length) throw new Error(`${path}: no FROM`);
  return { text, stages, final: stages[stages.length - 1] };
}

export function instructionsOf(stage: Stage, keyword: string): Step[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}

/** The JSON array of an exec-form instruction (ENTRYPOINT, CMD), or null for the shell form. */
export function execForm(args: string): string[] | null {
  const t = args.trim();
  if (!t.startsWith('[')) return null;
  const v = JSON.parse(t) as unknown;
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : null;
}

/** HEALTHCHECK CMD [...]: the exec-form command (null for NONE or the shell form). */
export function healthcheckCommand(step: Step): string[] | null {
  const m = /^CMD\s+([\s\S]+)$/.exec(step.args.trim());
  return m ? execForm(m[1]) : null;
}
