// The parsing half of gotemplate.ts: the template text cut into text and actions (with Go's
// {{- -}} trimming), each action lexed and parsed into pipelines, and the tree of if / with /
// range / define / template. Unknown keywords throw.

export type Fn = (...args: any[]) => unknown;

/** An integer (a literal, or `int`'s result); a bare JS number is a float64, as YAML values are in Helm. */
export class GoInt {
  constructor(readonly v: number) {}
  toString(): string { return String(this.v); }
}

export class TemplateError extends Error {}

// ---------------------------------------------------------------- lexing the template text

type Seg = { kind: 'text'; text: string } | { kind: 'action'; src: string; at: number };

export function segments(src: string, name: string): Seg[] {
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

export function lex(src: string): Tok[] {
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

export type Operand =
  | { k: 'lit'; v: unknown } | { k: 'dot'; fields: string[] } | { k: 'var'; name: string; fields: string[] }
  | { k: 'fn'; name: string } | { k: 'sub'; pipe: Pipeline; fields: string[] };
export type Command = Operand[];
export interface Pipeline { decl: string[]; assign: boolean; cmds: Command[] }

export function parsePipeline(toks: Tok[], pos = { i: 0 }, stopAtParen = false): Pipeline {
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

export type Node =
  | { n: 'text'; text: string }
  | { n: 'out'; pipe: Pipeline }
  | { n: 'if'; branches: { cond: Pipeline | null; body: Node[] }[] }
  | { n: 'with'; pipe: Pipeline; body: Node[]; else: Node[] }
  | { n: 'range'; pipe: Pipeline; body: Node[]; else: Node[] }
  | { n: 'template'; name: string; arg: Pipeline | null };

const KEYWORD = /^(if|else if|else|end|range|with|define|template|block)\b\s*([\s\S]*)$/;

export function parseTree(segs: Seg[], defines: Map<string, Node[]>, file: string): Node[] {
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

