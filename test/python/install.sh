#!/usr/bin/env bash
# Installs the pinned Python clients of the client suite into a venv outside the git tree,
# once: a stamp of the requirement files in the venv skips the install while they are unchanged.
#   bash test/python/install.sh        (PYTHON=python3.11 to choose the interpreter, >= 3.10)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${WARMROUTE_CLIENTS_VENV:-$HOME/.cache/warmroute/venv-clients}"
python="${PYTHON:-python3}"
stamp="$(cat "$here/requirements.txt" "$here/constraints.txt" | sha256sum | cut -c1-16)"
if [[ -x "$venv/bin/python" && "$(cat "$venv/.warmroute-stamp" 2>/dev/null)" == "$stamp" ]]; then
  exit 0
fi
echo "installing the Python clients into $venv (once; about a minute)" >&2
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python >= 3.10 needed (set PYTHON=)")'
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" -c "$here/constraints.txt"
echo "$stamp" > "$venv/.warmroute-stamp"
