#!/usr/bin/env bash
# Installs the peer routers that `npm run bench:peers` compares warmroute with, once, pinned, into a
# venv outside the git tree, plus Debian's nginx when it is missing. Safe to re-run: a venv whose
# pins already match is left alone. Nothing here is committed but this script.
set -euo pipefail

VENV="${WARMROUTE_PEERS_VENV:-$HOME/.cache/warmroute/venv-peers}"
# The pins. Change them here and in docs/peers.md together.
PINS=(
  "sglang-router==0.3.2"
  "vllm-router==0.1.17"
)
# LiteLLM's proxy: the package and its [proxy] extra spelled out (see the file for why).
LITELLM_REQS="$(dirname "$0")/litellm-proxy.txt"
STAMP="$VENV/.warmroute-pins"
WANT="${PINS[*]} $(sha256sum "$LITELLM_REQS" | cut -c1-16)"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "peers venv up to date: $VENV"
else
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  # nice: the machine is shared; the install is a one-off.
  nice -n 10 "$VENV/bin/pip" install --quiet "${PINS[@]}" -r "$LITELLM_REQS"
  printf '%s' "$WANT" > "$STAMP"
  echo "installed into $VENV: ${PINS[*]}"
fi

if ! command -v nginx >/dev/null 2>&1 && [[ ! -x /usr/sbin/nginx ]]; then
  echo "nginx missing: installing Debian's"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx
fi
