// A Go text/template engine for the subset helm/warmroute uses, kept faithful where a chart can
// go wrong: whitespace trimming ({{- -}}), truthiness, lexical variable scope, `range` over maps in
// key order, `and`/`or` returning an operand, comparisons that refuse to mix ints and floats (values
// from YAML are float64 in Helm, so `eq .Values.n 1` is an error there too), and %v of a float64
// (Helm prints 1000000 as 1e+06). Anything outside the subset throws: the chart cannot drift past
// what its test checks without the test saying so. The functions (Helm's and Sprig's) are in
// helm-render.ts; this file knows none of them.

import { GoInt, parseTree, segments, TemplateError, type Command, type Fn, type Node, type Operand, type Pipeline } from './gotemplate-parse.js';

export { GoInt, TemplateError, type Fn } from './gotemplate-parse.js';

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
