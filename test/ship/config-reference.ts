// The configuration reference in docs/configuration.md, generated from src/config/schema.ts: every
// key's path, type and default from the TypeBox schema itself, its text from the doc comment above
// it in the source (or, for a key the source leaves bare, its comment in config/warmroute.example.yaml). test/ship/config-reference.test.ts fails when the page and this disagree;
// `npx tsx test/ship/config-reference.ts --write` rewrites the page's generated part.

import { readFileSync, writeFileSync } from 'node:fs';
import ts from 'typescript';
import { isMap, isPair, isScalar, isSeq, parseDocument } from 'yaml';
import { ConfigSchema } from '../../src/config/schema.js';

export const PAGE = 'docs/configuration.md';
export const BEGIN = '<!-- generated from src/config/schema.ts by test/ship/config-reference.ts: do not edit by hand -->';
export const END = '<!-- end of generated reference -->';

const INTRO = '#intro';

function s_find(source: ts.SourceFile, name: string): ts.Node | undefined {
  return source.statements.find((st) => ts.isVariableStatement(st)
    && st.declarationList.declarations.some((d) => ts.isIdentifier(d.name) && d.name.text === name));
}

export interface KeyRow { path: string; type: string; default: string; text: string }

interface Schema {
  type?: string; properties?: Record<string, Schema>; items?: Schema; anyOf?: Schema[];
  const?: unknown; default?: unknown; minimum?: number; maximum?: number;
}

/** Every leaf key of the schema, in source order: `a.b`, `upstreams[].url`. */
export function schemaKeys(schema: Schema = ConfigSchema as unknown as Schema, prefix = ''): { path: string; schema: Schema }[] {
  const out: { path: string; schema: Schema }[] = [];
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    const path = prefix ? `${prefix}.${name}` : name;
    if (child.type === 'object' && child.properties) out.push(...schemaKeys(child, path));
    else if (child.type === 'array' && child.items?.type === 'object' && child.items.properties) out.push(...schemaKeys(child.items, `${path}[]`));
    else out.push({ path, schema: child });
  }
  return out;
}

function typeOf(s: Schema): string {
  if (s.anyOf) {
    const literals = s.anyOf.filter((a) => a.const !== undefined).map((a) => `\`${String(a.const)}\``);
    const rest = s.anyOf.filter((a) => a.const === undefined).map(typeOf);
    return [...literals, ...rest].join(' \\| ');
  }
  if (s.type === 'array') return `list of ${s.items ? typeOf(s.items) : 'values'}`;
  if (s.type === 'null') return 'null';
  const range = s.minimum !== undefined || s.maximum !== undefined ? ` (${s.minimum ?? ''}…${s.maximum ?? ''})` : '';
  return `${s.type ?? 'value'}${range}`;
}

function defaultOf(s: Schema): string {
  if (s.default === undefined) return '—';
  return `\`${JSON.stringify(s.default)}\``;
}

/** Doc comments of schema.ts by key path, following the named sub-schemas the root refers to. */
export function schemaComments(file = 'src/config/schema.ts'): Map<string, string> {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const named = new Map<string, ts.Expression>();
  for (const st of source.statements) {
    if (!ts.isVariableStatement(st)) continue;
    for (const d of st.declarationList.declarations) if (ts.isIdentifier(d.name) && d.initializer) named.set(d.name.text, d.initializer);
  }
  const out = new Map<string, string>();
  const commentOf = (node: ts.Node): string => {
    const text = source.text;
    const ranges = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
    return ranges.map((r) => text.slice(r.pos, r.end)).filter((c) => c.startsWith('/**'))
      .map((c) => c.replace(/^\/\*\*|\*\/$/g, '').split('\n').map((l) => l.replace(/^\s*\*\s?/, '').trim()).join(' ').trim())
      .join(' ');
  };
  // The object literal a schema expression describes, and whether it is a list of them.
  const objectOf = (e: ts.Expression): { literal: ts.ObjectLiteralExpression; list: boolean } | null => {
    if (ts.isIdentifier(e)) { const d = named.get(e.text); return d ? objectOf(d) : null; }
    if (ts.isCallExpression(e)) {
      const callee = e.expression.getText(source);
      const first = e.arguments[0];
      if (!first) return null;
      if (callee === 'Type.Array') { const inner = objectOf(first); return inner ? { literal: inner.literal, list: true } : null; }
      if (callee === 'Type.Optional') return objectOf(first);
      if ((callee === 'Type.Object' || callee === 'Section') && ts.isObjectLiteralExpression(first)) return { literal: first, list: false };
    }
    return null;
  };
  const declarationOf = (name: string): ts.Node | undefined => s_find(source, name);
  const walk = (literal: ts.ObjectLiteralExpression, prefix: string) => {
    for (const p of literal.properties) {
      if (!ts.isPropertyAssignment(p)) continue;
      const path = prefix ? `${prefix}.${p.name.getText(source)}` : p.name.getText(source);
      const inner = objectOf(p.initializer);
      if (!inner) { out.set(path, commentOf(p)); continue; }
      // A section's own comment, and the one above the named schema it refers to, introduce it.
      const decl = ts.isIdentifier(p.initializer) ? declarationOf(p.initializer.text) : undefined;
      const intro = [commentOf(p), decl ? commentOf(decl) : ''].filter(Boolean).join(' ');
      if (intro) out.set(`${path}${INTRO}`, intro);
      walk(inner.literal, inner.list ? `${path}[]` : path);
    }
  };
  const root = objectOf(ts.factory.createIdentifier('ConfigSchema'));
  if (!root) throw new Error('ConfigSchema is not an object literal');
  walk(root.literal, '');
  return out;
}

/** The example file's comments by key path (the line above a key, or the one after its value). */
export function exampleComments(file = 'config/warmroute.example.yaml'): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (node: unknown, prefix: string) => {
    if (isSeq(node)) { for (const item of node.items) walk(item, `${prefix}[]`); return; }
    if (!isMap(node)) return;
    for (const pair of node.items) {
      if (!isPair(pair) || !isScalar(pair.key)) continue;
      const path = prefix ? `${prefix}.${String(pair.key.value)}` : String(pair.key.value);
      const value = pair.value as { comment?: string | null } | null;
      const text = [pair.key.commentBefore, value?.comment].filter(Boolean).join(' ').replace(/\s+/g, ' ').trim();
      if (text) out.set(path, text);
      walk(pair.value, path);
    }
  };
  walk(parseDocument(readFileSync(file, 'utf8')).contents, '');
  return out;
}

/** Every key: the schema's own comment, else the example file's comment on it. */
export function configRows(): KeyRow[] {
  const comments = schemaComments();
  const example = exampleComments();
  return schemaKeys().map(({ path, schema }) => ({
    path, type: typeOf(schema), default: defaultOf(schema), text: comments.get(path) || example.get(path) || '',
  }));
}

/** The generated part of the page: one table per top-level section, each opened by its comment. */
export function renderReference(): string {
  const comments = schemaComments();
  const rows = configRows();
  const sections = [...new Set(rows.map((r) => r.path.split(/[.[]/)[0]))];
  const parts: string[] = [BEGIN, ''];
  for (const section of sections) {
    parts.push(`### \`${section}\``, '');
    for (const [k, v] of comments) {
      if (!k.endsWith(INTRO)) continue;
      const at = k.slice(0, -INTRO.length);
      if (at === section) parts.push(cell(v), '');
      else if (at.startsWith(`${section}.`) || at.startsWith(`${section}[]`)) parts.push(`\`${at}\`: ${cell(v)}`, '');
    }
    parts.push('| key | type | default | what it does |', '|---|---|---|---|');
    for (const r of rows.filter((x) => x.path.split(/[.[]/)[0] === section)) {
      parts.push(`| \`${r.path}\` | ${r.type} | ${cell(r.default)} | ${cell(r.text)} |`);
    }
    parts.push('');
  }
  parts.push(END);
  return parts.join('\n');
}

/** Table-cell text: pipes escaped, and angle brackets outside code spans, so `<token>` is not read as HTML. */
function cell(text: string): string {
  return text.split('`').map((part, i) => (i % 2 === 1 ? part : part.replace(/</g, '&lt;').replace(/>/g, '&gt;'))).join('`').replace(/\|/g, '\\|');
}

/** The page with its generated part replaced by a fresh rendering. */
export function pageWithReference(page: string): string {
  const a = page.indexOf(BEGIN);
  const b = page.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${PAGE} lacks the generated-reference markers`);
  return page.slice(0, a) + renderReference() + page.slice(b + END.length);
}

if (process.argv.includes('--write')) writeFileSync(PAGE, pageWithReference(readFileSync(PAGE, 'utf8')));
