// A Go text/template engine for the subset helm/warmroute uses, kept faithful where a chart can
// go wrong: whitespace trimming ({{- -}}), truthiness, lexical variable scope, `range` over maps in
// key order, `and`/`or` returning an operand, comparisons that refuse to mix ints and floats (values
// from YAML are float64 in Helm, so `eq .Values.n 1` is an error there too), and %v of a float64
// (Helm prints 1000000 as 1e+06). Anything outside the subset throws: the chart cannot drift past
// what its test checks without the test saying so. The functions (Helm's and Sprig's) are in
// helm-render.ts; this file knows none of them.

export type Fn = (...args: any[]) => unknown;

/** An integer (a literal, or `int`'s result); a bare JS number is a float64, as YAML values are in Helm. */
export class GoInt {
  constructor(readonly v: number) {}
  toString(): string { return String(this.v); }
}

export class TemplateError extends Error {}

// ---------------------------------------------------------------- lexing the template text

type Seg = { kind: 'text'; text: string } | { kind: 'action'; src: string; at: number };

function segments(src: string, name: string): Seg[] {
  const out: Seg[] = [];
  let i = 0;
  let trimNext = false;
  while (i < src.length) {
    const open = src.indexOf('{{', i);
    let text = src.slice(i, open < 0 ? src.length : open);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (open < 0) {
      out.push({ kind: 'text', text });
      break;
    }
    const close = src.indexOf('}}', open + 2);
    if (close < 0) throw new TemplateError(`${name}: unclosed action at ${open}`);
    let inner = src.slice(open + 2, close);
    if (/^- /.test(inner) || inner === '-') {
      text = text.replace(/\s+$/, '');
      inner = inner.slice(1);
    }
    trimNext = / -$/.test(inner);
    if (trimNext) inner = inner.slice(0, -1);
    // A comment may hold "}}": find its own end.
    if (/^\s*\/\*/.test(inner) && !/\*\/\s*$/.test(inner)) throw new TemplateError(`${name}: comments must end with */ before }}`);
    if (text) out.push({ kind: 'text', text });
    if (!/^\s*\/\*[\s\S]*\*\/\s*$/.test(inner)) out.push({ kind: 'action', src: inner.trim(), at: open });
    i = close + 2;
  }
  return out;
}

// ---------------------------------------------------------------- lexing an action

type Tok =
  | { t: 'str'; v: string } | { t: 'num'; v: number; int: boolean } | { t: 'bool'; v: boolean } | { t: 'nil' }
  | { t: 'var'; v: string } | { t: 'field'; v: string[] } | { t: 'dot' } | { t: 'ident'; v: string }
  | { t: 'op'; v: ':=' | '=' | '|' | '(' | ')' | ',' };

function lex(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  const fields = (): string[] => {
    const f: string[] = [];
    while (src[i] === '.' && /[A-Za-z_]/.test(src[i + 1] ?? '')) {
      const m = /^\.([A-Za-z_]\w*)/.exec(src.slice(i))!;
      f.push(m[1]);
      i += m[0].length;
    }
    return f;
  };
  while (i < src.length) {
    const c = src[i];
    const rest = src.slice(i);
    let m: RegExpExecArray | null;
    if (/\s/.test(c)) { i++; continue; }
    if (rest.startsWith(':=')) { out.push({ t: 'op', v: ':=' }); i += 2; continue; }
    if ('=|(),'.includes(c)) {
      out.push({ t: 'op', v: c as '=' });
      i++;
      // A field chain straight after ")" selects from the parenthesised value.
      if (c === ')' && src[i] === '.') out.push({ t: 'field', v: fields() });
      continue;
    }
    if (c === '"') {
      m = /^"((?:[^"\\]|\\.)*)"/.exec(rest);
      if (!m) throw new TemplateError(`unterminated string in {{${src}}}`);
      out.push({ t: 'str', v: JSON.parse(`"${m[1]}"`) as string });
      i += m[0].length;
      continue;
    }
    if (c === '`') {
      const end = src.indexOf('`', i + 1);
      out.push({ t: 'str', v: src.slice(i + 1, end) });
      i = end + 1;
      continue;
    }
    if ((m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(rest))) {
      out.push({ t: 'num', v: Number(m[0]), int: !m[1] && !m[2] });
      i += m[0].length;
      continue;
    }
    if (c === '$') {
      m = /^\$\w*/.exec(rest)!;
      i += m[0].length;
      out.push({ t: 'var', v: m[0] });
      if (src[i] === '.') out.push({ t: 'field', v: fields() });
      continue;
    }
    if (c === '.') {
      const f = fields();
      if (f.length) out.push({ t: 'field', v: f });
      else { out.push({ t: 'dot' }); i++; }
      continue;
    }
    if ((m = /^[A-Za-z_]\w*/.exec(rest))) {
      const w = m[0];
      out.push(w === 'true' || w === 'false' ? { t: 'bool', v: w === 'true' } : w === 'nil' ? { t: 'nil' } : { t: 'ident', v: w });
      i += w.length;
      continue;
    }
    throw new TemplateError(`unexpected ${JSON.stringify(c)} in {{${src}}}`);
  }
  return out;
}

// ---------------------------------------------------------------- expressions

type Operand =
  | { k: 'lit'; v: unknown } | { k: 'dot'; fields: string[] } | { k: 'var'; name: string; fields: string[] }
  | { k: 'fn'; name: string } | { k: 'sub'; pipe: Pipeline; fields: string[] };
type Command = Operand[];
interface Pipeline { decl: string[]; assign: boolean; cmds: Command[] }

function parsePipeline(toks: Tok[], pos = { i: 0 }, stopAtParen = false): Pipeline {
  const p: Pipeline = { decl: [], assign: false, cmds: [] };
  // $x := ..., $i, $v := ..., $x = ...
  const save = pos.i;
  const vars: string[] = [];
  while (toks[pos.i]?.t === 'var') {
    vars.push((toks[pos.i] as { v: string }).v);
    pos.i++;
    const n = toks[pos.i];
    if (n?.t === 'op' && n.v === ',') { pos.i++; continue; }
    break;
  }
  const op = toks[pos.i];
  if (vars.length && op?.t === 'op' && (op.v === ':=' || op.v === '=')) {
    p.decl = vars;
    p.assign = op.v === '=';
    pos.i++;
  } else {
    pos.i = save;
  }
  let cmd: Command = [];
  while (pos.i < toks.length) {
    const t = toks[pos.i++];
    if (t.t === 'op' && t.v === ')') {
      if (!stopAtParen) throw new TemplateError('unexpected )');
      break;
    }
    if (t.t === 'op' && t.v === '|') { p.cmds.push(cmd); cmd = []; continue; }
    if (t.t === 'op' && t.v === '(') {
      const sub = parsePipeline(toks, pos, true);
      const next = toks[pos.i];
      const fields = next?.t === 'field' ? (pos.i++, next.v) : [];
      cmd.push({ k: 'sub', pipe: sub, fields });
      continue;
    }
    if (t.t === 'str' || t.t === 'bool') cmd.push({ k: 'lit', v: t.v });
    else if (t.t === 'num') cmd.push({ k: 'lit', v: t.int ? new GoInt(t.v) : t.v });
    else if (t.t === 'nil') cmd.push({ k: 'lit', v: null });
    else if (t.t === 'dot') cmd.push({ k: 'dot', fields: [] });
    else if (t.t === 'field') cmd.push({ k: 'dot', fields: t.v });
    else if (t.t === 'var') {
      const next = toks[pos.i];
      const fields = next?.t === 'field' ? (pos.i++, next.v) : [];
      cmd.push({ k: 'var', name: t.v, fields });
    } else if (t.t === 'ident') cmd.push({ k: 'fn', name: t.v });
    else throw new TemplateError(`unexpected ${JSON.stringify(t)}`);
  }
  if (cmd.length) p.cmds.push(cmd);
  if (!p.cmds.length) throw new TemplateError('empty pipeline');
  return p;
}

// ---------------------------------------------------------------- the tree

type Node =
  | { n: 'text'; text: string }
  | { n: 'out'; pipe: Pipeline }
  | { n: 'if'; branches: { cond: Pipeline | null; body: Node[] }[] }
  | { n: 'with'; pipe: Pipeline; body: Node[]; else: Node[] }
  | { n: 'range'; pipe: Pipeline; body: Node[]; else: Node[] }
  | { n: 'template'; name: string; arg: Pipeline | null };

const KEYWORD = /^(if|else if|else|end|range|with|define|template|block)\b\s*([\s\S]*)$/;

function parseTree(segs: Seg[], defines: Map<string, Node[]>, file: string): Node[] {
  let i = 0;
  // Returns the body and the keyword that ended it (end, else, else if ...).
  const body = (): { nodes: Node[]; end: string; rest: string } => {
    const nodes: Node[] = [];
    while (i < segs.length) {
      const s = segs[i++];
      if (s.kind === 'text') { nodes.push({ n: 'text', text: s.text }); continue; }
      const m = KEYWORD.exec(s.src);
      if (!m) { nodes.push({ n: 'out', pipe: parsePipeline(lex(s.src)) }); continue; }
      const [, kw, rest] = m;
      if (kw === 'end' || kw === 'else' || kw === 'else if') return { nodes, end: kw, rest };
      if (kw === 'if') {
        const branches: { cond: Pipeline | null; body: Node[] }[] = [];
        let cond: Pipeline | null = parsePipeline(lex(rest));
        for (;;) {
          const b = body();
          branches.push({ cond, body: b.nodes });
          if (b.end === 'end') break;
          cond = b.end === 'else if' ? parsePipeline(lex(b.rest)) : null;
          if (cond === null) {
            const last = body();
            if (last.end !== 'end') throw new TemplateError(`${file}: else after else`);
            branches.push({ cond: null, body: last.nodes });
            break;
          }
        }
        nodes.push({ n: 'if', branches });
      } else if (kw === 'with' || kw === 'range') {
        const pipe = parsePipeline(lex(rest));
        const b = body();
        let other: Node[] = [];
        if (b.end === 'else') {
          const e = body();
          if (e.end !== 'end') throw new TemplateError(`${file}: ${kw} ... else ... must end`);
          other = e.nodes;
        } else if (b.end !== 'end') throw new TemplateError(`${file}: ${b.end} in ${kw}`);
        nodes.push({ n: kw, pipe, body: b.nodes, else: other } as Node);
      } else if (kw === 'define') {
        const name = JSON.parse(rest.trim()) as string;
        const b = body();
        if (b.end !== 'end') throw new TemplateError(`${file}: define ${name} must end`);
        defines.set(name, b.nodes);
      } else if (kw === 'template') {
        const t = lex(rest);
        const nameTok = t.shift();
        if (nameTok?.t !== 'str') throw new TemplateError(`${file}: template needs a name`);
        nodes.push({ n: 'template', name: nameTok.v, arg: t.length ? parsePipeline(t) : null });
      } else throw new TemplateError(`${file}: {{${kw}}} is outside the supported subset`);
    }
    return { nodes, end: 'eof', rest: '' };
  };
  const top = body();
  if (top.end !== 'eof') throw new TemplateError(`${file}: unexpected {{${top.end}}}`);
  return top.nodes;
}

// ---------------------------------------------------------------- values, as Go sees them

/** Go's truth: false, 0, nil, and empty strings, slices and maps are false. */
export function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === '') return false;
  if (typeof v === 'number') return v !== 0;
  if (v instanceof GoInt) return v.v !== 0;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** strconv.FormatFloat(f, 'g', -1, 64), which %v uses for a float64: exponent form from 1e+06 up (and below 1e-04). */
export function formatFloat(f: number): string {
  if (!Number.isFinite(f)) return f > 0 ? '+Inf' : f < 0 ? '-Inf' : 'NaN';
  if (f === 0) return '0';
  const [mant, expS] = f.toExponential().split('e');
  const exp = Number(expS);
  if (exp < -4 || exp >= 6) return `${mant}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  return String(f);
}

/** What {{ value }} prints (fmt %v). Maps and slices are refused: a chart never means to print one. */
export function printValue(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return formatFloat(v);
  if (v instanceof GoInt) return String(v.v);
  if (typeof v === 'string' || typeof v === 'boolean') return String(v);
  throw new TemplateError(`printing a ${Array.isArray(v) ? 'list' : 'map'} directly (use toYaml): ${JSON.stringify(v).slice(0, 80)}`);
}

// ---------------------------------------------------------------- execution

interface Scope { vars: Map<string, unknown>; parent: Scope | null }

export class Engine {
  private readonly defines = new Map<string, Node[]>();
  private readonly files = new Map<string, Node[]>();
  constructor(private readonly funcs: Record<string, Fn>) {}

  /** Parses a template file; its {{define}}s become available to every file. */
  add(name: string, src: string): void {
    this.files.set(name, parseTree(segments(src, name), this.defines, name));
  }

  render(name: string, data: unknown): string {
    const nodes = this.files.get(name);
    if (!nodes) throw new TemplateError(`no template ${name}`);
    return this.exec(nodes, data, { vars: new Map([['$', data]]), parent: null });
  }

  /** {{ include "name" ctx }} / {{ template "name" ctx }}. */
  include(name: string, data: unknown): string {
    const nodes = this.defines.get(name) ?? this.files.get(name);
    if (!nodes) throw new TemplateError(`no template "${name}" defined`);
    return this.exec(nodes, data, { vars: new Map([['$', data]]), parent: null });
  }

  private exec(nodes: Node[], dot: unknown, scope: Scope): string {
    let out = '';
    for (const node of nodes) {
      switch (node.n) {
        case 'text': out += node.text; break;
        case 'out': {
          const v = this.pipeline(node.pipe, dot, scope);
          if (!node.pipe.decl.length) out += printValue(v);
          break;
        }
        case 'if': {
          for (const b of node.branches) {
            const inner: Scope = { vars: new Map(), parent: scope };
            if (b.cond === null || truthy(this.pipeline(b.cond, dot, inner))) {
              out += this.exec(b.body, dot, inner);
              break;
            }
          }
          break;
        }
        case 'with': {
          const inner: Scope = { vars: new Map(), parent: scope };
          const v = this.pipeline(node.pipe, dot, inner);
          out += truthy(v) ? this.exec(node.body, v, inner) : this.exec(node.else, dot, { vars: new Map(), parent: scope });
          break;
        }
        case 'range': {
          const { decl } = node.pipe;
          const v = this.pipeline({ ...node.pipe, decl: [] }, dot, scope);
          const items: [unknown, unknown][] = Array.isArray(v)
            ? v.map((x, i) => [new GoInt(i), x])
            : v && typeof v === 'object' && !(v instanceof GoInt)
              ? Object.keys(v).sort().map((k) => [k, (v as Record<string, unknown>)[k]])
              : v === null || v === undefined ? [] : (() => { throw new TemplateError(`range over ${typeof v}`); })();
          if (!items.length) { out += this.exec(node.else, dot, { vars: new Map(), parent: scope }); break; }
          for (const [k, x] of items) {
            const inner: Scope = { vars: new Map(), parent: scope };
            if (decl.length === 1) inner.vars.set(decl[0], x);
            if (decl.length === 2) { inner.vars.set(decl[0], k); inner.vars.set(decl[1], x); }
            out += this.exec(node.body, x, inner);
          }
          break;
        }
        case 'template':
          out += this.include(node.name, node.arg ? this.pipeline(node.arg, dot, scope) : null);
          break;
      }
    }
    return out;
  }

  private lookupVar(name: string, scope: Scope): unknown {
    for (let s: Scope | null = scope; s; s = s.parent) if (s.vars.has(name)) return s.vars.get(name);
    if (name === '$') return undefined;
    throw new TemplateError(`undefined variable ${name}`);
  }

  private pipeline(p: Pipeline, dot: unknown, scope: Scope): unknown {
    let v: unknown;
    let first = true;
    for (const cmd of p.cmds) {
      v = this.command(cmd, dot, scope, first ? [] : [v]);
      first = false;
    }
    if (p.decl.length === 1) {
      if (p.assign) {
        let s: Scope | null = scope;
        while (s && !s.vars.has(p.decl[0])) s = s.parent;
        if (!s) throw new TemplateError(`undefined variable ${p.decl[0]}`);
        s.vars.set(p.decl[0], v);
      } else scope.vars.set(p.decl[0], v);
    } else if (p.decl.length > 1) throw new TemplateError('two variables only in range');
    return v;
  }

  private command(cmd: Command, dot: unknown, scope: Scope, piped: unknown[]): unknown {
    const [head, ...rest] = cmd;
    const args = () => [...rest.map((o) => this.operand(o, dot, scope)), ...piped];
    if (head.k === 'fn') {
      const f = this.funcs[head.name];
      if (!f) throw new TemplateError(`function "${head.name}" is outside the supported subset`);
      // and/or short-circuit on their operands (Go 1.18+).
      if (head.name === 'and' || head.name === 'or') {
        let last: unknown;
        for (const o of rest) {
          last = this.operand(o, dot, scope);
          if (head.name === 'and' ? !truthy(last) : truthy(last)) return last;
        }
        for (const x of piped) last = x;
        return last;
      }
      return f(...args());
    }
    const v = this.operand(head, dot, scope);
    if (typeof v === 'function') return (v as Fn)(...args());
    if (rest.length || piped.length) throw new TemplateError(`${JSON.stringify(head)} is not a function but has arguments`);
    return v;
  }

  private operand(o: Operand, dot: unknown, scope: Scope): unknown {
    switch (o.k) {
      case 'lit': return o.v;
      case 'fn': {
        const f = this.funcs[o.name];
        if (!f) throw new TemplateError(`function "${o.name}" is outside the supported subset`);
        return f();
      }
      case 'dot': return select(dot, o.fields);
      case 'var': return select(this.lookupVar(o.name, scope), o.fields);
      case 'sub': return select(this.pipeline(o.pipe, dot, scope), o.fields);
    }
  }
}

/** .A.B on maps: a missing key is nil (Helm renders it as empty), a field of nil is an error, as in Go. */
function select(v: unknown, fields: string[]): unknown {
  let cur = v;
  for (const [i, f] of fields.entries()) {
    if (cur === null || cur === undefined) {
      throw new TemplateError(`nil pointer evaluating .${fields.slice(0, i + 1).join('.')}`);
    }
    if (typeof cur !== 'object') throw new TemplateError(`can't evaluate field ${f} in type ${typeof cur}`);
    cur = (cur as Record<string, unknown>)[f];
  }
  return cur;
}
