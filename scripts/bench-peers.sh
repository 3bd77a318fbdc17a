#!/usr/bin/env bash
# Install the peers the benchmark compares against (not needed by the tests), pinned, into
# <repo>/target/peers/bin: the official Rust ACP conductor, `agent-client-protocol-conductor`.
# Idempotent: does nothing when the pinned version is already there.
#
#   scripts/bench-peers.sh            # then: cargo bench --bench proxy
#
# Env overrides: PEERS_ROOT (default <repo>/target/peers).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_ROOT="${PEERS_ROOT:-$ROOT/target/peers}"
CONDUCTOR_VERSION=5.0.0
BIN="$PEERS_ROOT/bin/agent-client-protocol-conductor"

if [[ -x "$BIN" ]] && "$BIN" --version 2>/dev/null | grep -qF " $CONDUCTOR_VERSION"; then
  exit 0
fi
echo "[bench-peers] installing agent-client-protocol-conductor $CONDUCTOR_VERSION into $PEERS_ROOT" >&2
cargo install --locked --version "$CONDUCTOR_VERSION" --root "$PEERS_ROOT" agent-client-protocol-conductor
"$BIN" --version >&2
