#!/usr/bin/env bash
# Installs inference-perf (the Gateway API Inference Extension's and llm-d's benchmark tool, PyPI),
# pinned, into a venv outside the git tree. It needs Python >= 3.12: python3.12 from the PATH (or
# pyenv's), else $PYTHON. Safe to re-run: a venv whose pin matches is left alone.
set -euo pipefail

VENV="${WARMROUTE_WITNESS_VENV:-$HOME/.cache/warmroute/venv-iperf}"
PIN="inference-perf==0.7.0"
STAMP="$VENV/.warmroute-pin"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$PIN" ]]; then
  echo "inference-perf venv up to date: $VENV"
  exit 0
fi
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if command -v python3.12 >/dev/null 2>&1; then PY=python3.12
  elif command -v pyenv >/dev/null 2>&1 && PYENV_VERSION=3.12.1 pyenv which python3.12 >/dev/null 2>&1; then PY="$(PYENV_VERSION=3.12.1 pyenv which python3.12)"
  else echo "inference-perf needs Python >= 3.12: set PYTHON" >&2; exit 1
  fi
fi
PYENV_VERSION="${PYENV_VERSION:-3.12.1}" "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
nice -n 10 "$VENV/bin/pip" install --quiet "$PIN"
printf '%s' "$PIN" > "$STAMP"
echo "installed $PIN into $VENV"
