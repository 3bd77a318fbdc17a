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
PYTHON="${PYTHON:-python3}"
VENV="$PEERS/phoenix"
STAMP="$VENV/.stamp"
WANT="$PKG==$VER"

if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/phoenix" ]]; then
  exit 0
fi
echo "[otlp-backend] installing $WANT into $VENV" >&2
mkdir -p "$PEERS"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$WANT"
test -x "$VENV/bin/phoenix"
echo "$WANT" > "$STAMP"
