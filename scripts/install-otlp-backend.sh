#!/usr/bin/env bash
# Install the OTLP backend the tracing tests (tests/it/otel.rs) export to: Arize Phoenix, pinned,
# from PyPI, in its own venv under <repo>/.peers/phoenix/. It serves OTLP/HTTP (/v1/traces,
# protobuf and JSON) and a REST API that reads spans back. Idempotent: a no-op when the pinned
# version is there. About 850 MB and 2.5 minutes the first time (Phoenix brings its web app,
# SQLAlchemy, pandas, grpc…); starting it takes about 20 s.
#
# Env overrides: PEERS_DIR (default <repo>/.peers), PYTHON (default python3), FORCE=1.
set -euo pipefail

PKG=arize-phoenix
VER=20.26.1

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="${PEERS_DIR:-$ROOT/.peers}"
# By its physical path (a checkout's .peers is a link to the machine's): a venv's scripts name
# their interpreter by the path the venv was made at, which any checkout can then run.
mkdir -p "$PEERS"
PEERS="$(cd "$PEERS" && pwd -P)"
PYTHON="${PYTHON:-python3}"
VENV="$PEERS/phoenix"
STAMP="$VENV/.stamp"
WANT="$PKG==$VER"

# Whether the venv's `phoenix` script runs: its interpreter, named on its first line, is there
# (a venv made through another checkout's path to the peers is made again).
runs() {
  local interpreter
  interpreter="$(head -n 1 "$VENV/bin/phoenix" 2>/dev/null | sed 's/^#!//; s/ .*//')"
  [[ -n "$interpreter" && -x "$interpreter" ]]
}

if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/phoenix" ]] && runs; then
  exit 0
fi
echo "[otlp-backend] installing $WANT into $VENV" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$WANT"
test -x "$VENV/bin/phoenix"
echo "$WANT" > "$STAMP"
