// The chart renderer's template engine on the Go/Helm behaviours a chart trips over: each case is
// what `helm template` does (Go text/template, Sprig, values as float64).

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { renderChart } from './helm-render.js';

/** Renders one template in a throwaway chart with these values. */
function tpl(src: string, values = ''): string {
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-chart-'));
  try {
    mkdirSync(join(dir, 'templates'));
    writeFileSync(join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: c\nversion: 1.0.0\nappVersion: "2"\n');
    writeFileSync(join(dir, 'values.yaml'), values);
    writeFileSync(join(dir, 'templates', 't.txt'), src);
    writeFileSync(join(dir, 'templates', '_h.tpl'), '{{- define "h" -}}[{{ . }}]{{- end -}}');
    return renderChart(dir, { values: [] }).files['templates/t.txt'];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('whitespace: {{- trims every space and newline before, -}} after', () => {
  assert.equal(tpl('a \n  {{- "b" -}}  \n c'), 'abc');
  assert.equal(tpl('a\n{{ "b" }}\nc'), 'a\nb\nc');
  assert.equal(tpl('x:\n  {{- include "h" 1 | nindent 2 }}'), 'x:\n  [1]');
});

test('YAML numbers are float64: %v prints 1e+06, and comparing with an int literal is an error', () => {
  assert.equal(tpl('{{ .Values.n }} {{ .Values.m }} {{ int .Values.m }}', 'n: 30000\nm: 1000000\n'), '30000 1e+06 1000000');
  assert.throws(() => tpl('{{ if eq .Values.n 1 }}{{ end }}', 'n: 1\n'), /incompatible types for comparison/);
  assert.equal(tpl('{{ if gt (int .Values.n) 1 }}many{{ end }}', 'n: 2\n'), 'many');
});

test('truthiness, and/or returning an operand, default, range over a map in key order, variable scope', () => {
  assert.equal(tpl('{{ if .Values.e }}y{{ else }}n{{ end }}{{ if .Values.z }}y{{ else }}n{{ end }}', 'e: {}\nz: 0\n'), 'nn');
  assert.equal(tpl('{{ or .Values.a "fallback" }} {{ and "x" .Values.b }} {{ .Values.a | default "d" }}', 'a: ""\nb: 7\n'), 'fallback 7 d');
  assert.equal(tpl('{{ range $k, $v := .Values.m }}{{ $k }}={{ $v }};{{ end }}', 'm: { b: 2, a: 1 }\n'), 'a=1;b=2;');
  assert.equal(tpl('{{ $x := 1 }}{{ range .Values.l }}{{ $x = . }}{{ end }}{{ $x }}', 'l: [a, b]\n'), 'b');
  assert.throws(() => tpl('{{ range .Values.l }}{{ $y := . }}{{ end }}{{ $y }}', 'l: [a]\n'), /undefined variable \$y/);
});

test('a missing value prints nothing, a field of a missing map fails, and anything outside the subset throws', () => {
  assert.equal(tpl('[{{ .Values.nope }}]'), '[]');
  assert.throws(() => tpl('{{ .Values.nope.deeper }}'), /nil pointer evaluating \.Values\.nope\.deeper/);
  assert.throws(() => tpl('{{ tpl "x" . }}'), /function "tpl" is outside the supported subset/);
  assert.throws(() => tpl('{{ fail "stop here" }}'), /execution error: fail: stop here/);
  assert.throws(() => tpl('{{ required "set x" .Values.x }}'), /required: set x/);
});
