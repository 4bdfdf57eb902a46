#!/usr/bin/env bash
# Builds Jaeger v2 (the all-in-one `jaeger` binary: OTLP receiver, in-memory store, query API) from
# the Go module proxy into a directory outside the git tree, for the tracing case of test:real.
# The repository tags its v2 releases on the v1 module path too (Go modules cannot publish v2.x
# without a /v2 path), so module version v1.76.0 is Jaeger v2.13's cmd/jaeger.
# Its go.mod has replace directives, so `go install pkg@version` refuses it: the module's source is
# fetched from the proxy (`go mod download`), copied out of the read-only module cache and built there.
# Idempotent: a binary already built at this version is kept. Built at nice 10: the machine is shared.
set -euo pipefail

ROOT="${WARMROUTE_CACHE:-$HOME/.cache/warmroute}"
VERSION="${JAEGER_MODULE_VERSION:-v1.76.0}"
DEST="$ROOT/jaeger-$VERSION"
BIN="$DEST/jaeger"

if [[ -x "$BIN" ]]; then
  echo "jaeger already built: $BIN"
  exit 0
fi
command -v go >/dev/null || { echo "go is needed to build jaeger (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$DEST"
MOD=github.com/jaegertracing/jaeger
SRC_DIR="$(cd /tmp && go mod download -json "$MOD@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$SRC_DIR" ]] || { echo "go mod download gave no source for $MOD@$VERSION" >&2; exit 1; }
WORK="$ROOT/jaeger-src-$VERSION"
rm -rf "$WORK" && cp -r "$SRC_DIR" "$WORK" && chmod -R u+w "$WORK"
(cd "$WORK" && GOFLAGS=-buildvcs=false nice -n 10 go build -o "$BIN" ./cmd/jaeger)
rm -rf "$WORK"
"$BIN" --help >/dev/null
echo "jaeger built: $BIN"
