#!/usr/bin/env bash
# Install pinned ACP test peers (Python + TypeScript reference SDK examples)
# into <repo>/.peers/. Idempotent: a second run with the same pins is a no-op.
#
#   .peers/venv/                      python venv with agent-client-protocol and its [http]
#                                     extra (the remote transports acp.http and acp.ws), and
#                                     the MCP SDK (mcp), the client of `acp-journal mcp`
#   .peers/py-examples/               examples/ from the PyPI sdist
#                                     (echo_agent.py, agent.py, client.py, ...)
#   .peers/node/node_modules/@agentclientprotocol/sdk/dist/examples/agent.js
#   .peers/node-v2/node_modules/@agentclientprotocol/sdk/  the TypeScript SDK 2.4.0, whose
#                                     experimental/v2 API tests/agents/ts_v2_client.mjs uses,
#                                     and ws, which its experimental ws-client and server need
#                                     on Node (tests/agents/sdk_remote.mjs, ts_sdk_server.mjs)
#   .peers/rust-sdk/src-5.0.0/target/release/examples/{simple_agent_v2,v2_one_shot_client}
#                                     the Rust SDK's v2 examples (agent-client-protocol 5.0.0,
#                                     built from the crates.io source with its own Cargo.lock)
#   .peers/adapters/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js
#   .peers/adapters/node_modules/@agentclientprotocol/codex-acp/dist/index.js
#                                     the adapters users install today (with the Claude Code
#                                     and Codex binaries they drive; the tests point them at a
#                                     loopback model server of ours: no key, no network)
#
# Env overrides: PEERS_DIR (default <repo>/.peers), PYTHON (default python3),
# FORCE=1 to reinstall.
set -euo pipefail

PY_PKG=agent-client-protocol
PY_VER=0.12.1
PY_ARROW_VER=26.0.1
PY_DUCKDB_VER=2.0.1
# The official MCP SDK: the client the tests drive `acp-journal mcp` with (tests/it/mcp.rs).
PY_MCP_VER=2.3.0
NODE_PKG=@agentclientprotocol/sdk
NODE_VER=1.9.0
CLAUDE_PKG=@agentclientprotocol/claude-agent-acp
CLAUDE_VER=0.101.0
CODEX_PKG=@agentclientprotocol/codex-acp
CODEX_VER=2.6.0
CODEX_BIN_PKG=@openai/codex
CODEX_BIN_VER=0.166.0
NODE_V2_VER=2.4.0
WS_VER=8.18.3
# The Python SDK's [http] extra (httpx[http2], websockets) and everything it pulls in, pinned as
# pip resolved it on 2026-11-25 (h11 is the HTTP/1.1 the client speaks on http:// URLs).
PY_HTTP_PINS="httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 h2==4.4.1 hpack==4.2.0 hyperframe==6.1.0 websockets==17.4 anyio==4.16.0 idna==3.20 certifi==2026.10.19.post1"
RUST_SDK_PKG=agent-client-protocol
RUST_SDK_VER=5.0.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="${PEERS_DIR:-$ROOT/.peers}"
# By its physical path (a checkout's .peers is a link to the machine's): a venv's scripts name
# their interpreter by the path the venv was made at, which any checkout can then run.
mkdir -p "$PEERS"
PEERS="$(cd "$PEERS" && pwd -P)"
PYTHON="${PYTHON:-python3}"
STAMP="$PEERS/.stamp"
WANT="py=$PY_PKG==$PY_VER node=$NODE_PKG@$NODE_VER node-v2=$NODE_PKG@$NODE_V2_VER rust=$RUST_SDK_PKG@$RUST_SDK_VER claude=$CLAUDE_PKG@$CLAUDE_VER codex=$CODEX_PKG@$CODEX_VER+$CODEX_BIN_VER ws=$WS_VER py-http=${PY_HTTP_PINS// /,} mcp=$PY_MCP_VER layout=4"

log() { printf '[install-peers] %s\n' "$*" >&2; }
die() { printf '[install-peers] ERROR: %s\n' "$*" >&2; exit 1; }

VENV_PY="$PEERS/venv/bin/python"
PY_EX="$PEERS/py-examples"
NODE_SDK="$PEERS/node/node_modules/$NODE_PKG"
NODE_AGENT="$NODE_SDK/dist/examples/agent.js"
CLAUDE_DIR="$PEERS/adapters/node_modules/$CLAUDE_PKG"
CLAUDE_AGENT="$CLAUDE_DIR/dist/index.js"
CODEX_DIR="$PEERS/adapters/node_modules/$CODEX_PKG"
CODEX_AGENT="$CODEX_DIR/dist/index.js"
NODE_V2_SDK="$PEERS/node-v2/node_modules/$NODE_PKG"
RUST_SDK_SRC="$PEERS/rust-sdk/src-$RUST_SDK_VER"
RUST_V2_AGENT="$RUST_SDK_SRC/target/release/examples/simple_agent_v2"
RUST_V2_CLIENT="$RUST_SDK_SRC/target/release/examples/v2_one_shot_client"

# Whether the venv holds every pin of PY_HTTP_PINS at its exact version.
py_http_pinned() {
  # shellcheck disable=SC2086
  "$VENV_PY" - $PY_HTTP_PINS <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))
PY
}

# Whether the venv holds the MCP SDK at its pin.
py_mcp_pinned() {
  [[ "$("$VENV_PY" -c "import importlib.metadata as m; print(m.version('mcp'))" 2>/dev/null || true)" == "$PY_MCP_VER" ]]
}

check_installed() {
  [[ -x "$VENV_PY" ]] &&
  [[ -f "$PY_EX/echo_agent.py" && -f "$PY_EX/agent.py" && -f "$PY_EX/client.py" ]] &&
  [[ -f "$NODE_AGENT" ]] &&
  [[ -f "$CLAUDE_AGENT" ]] &&
  [[ -f "$CODEX_AGENT" ]] &&
  [[ -f "$NODE_V2_SDK/dist/v2/stable/acp.js" ]] &&
  [[ "$(node -p "require('$PEERS/node-v2/node_modules/ws/package.json').version" 2>/dev/null)" == "$WS_VER" ]] &&
  "$VENV_PY" -c "import acp.http, acp.ws, httpx, websockets, h2" 2>/dev/null && py_http_pinned &&
  py_mcp_pinned &&
  [[ -x "$RUST_V2_AGENT" && -x "$RUST_V2_CLIENT" ]]
}

if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] && check_installed; then
  log "peers already installed in $PEERS ($WANT); FORCE=1 to reinstall"
  exit 0
fi

mkdir -p "$PEERS"
rm -f "$STAMP"
if [[ "${FORCE:-0}" == 1 ]]; then
  log "FORCE=1: removing $PEERS/{venv,py-examples,sdist,node}"
  rm -rf "$PEERS/venv" "$PEERS/py-examples" "$PEERS/sdist" "$PEERS/node" "$PEERS/adapters"
fi

# ---------------------------------------------------------------- Python
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
if [[ ! -x "$VENV_PY" ]]; then
  log "creating venv $PEERS/venv ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv "$PEERS/venv"
fi
if [[ "$("$VENV_PY" -c "import importlib.metadata as m; print(m.version('$PY_PKG'))" 2>/dev/null || true)" == "$PY_VER" ]]; then
  log "$PY_PKG==$PY_VER already in venv"
else
  log "pip install $PY_PKG==$PY_VER into venv"
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check "$PY_PKG==$PY_VER"
fi
if py_http_pinned; then
  log "$PY_PKG[http] dependencies already in venv at their pins"
else
  log "pip install $PY_PKG[http]==$PY_VER ($PY_HTTP_PINS)"
  # shellcheck disable=SC2086
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check "$PY_PKG[http]==$PY_VER" $PY_HTTP_PINS
fi

# The MCP SDK, installed with the [http] pins so that pip keeps them.
if py_mcp_pinned && py_http_pinned; then
  log "mcp==$PY_MCP_VER already in venv"
else
  log "pip install mcp==$PY_MCP_VER into venv"
  # shellcheck disable=SC2086
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check "mcp==$PY_MCP_VER" $PY_HTTP_PINS
fi

# The team index's tables are Parquet that query engines read: the tests read them with
# pyarrow and DuckDB, as the README shows.
if [[ "$("$VENV_PY" -c "import importlib.metadata as m; print(m.version('pyarrow'), m.version('duckdb'))" 2>/dev/null || true)" == "$PY_ARROW_VER $PY_DUCKDB_VER" ]]; then
  log "pyarrow==$PY_ARROW_VER duckdb==$PY_DUCKDB_VER already in venv"
else
  log "pip install pyarrow==$PY_ARROW_VER duckdb==$PY_DUCKDB_VER into venv"
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check "pyarrow==$PY_ARROW_VER" "duckdb==$PY_DUCKDB_VER"
fi

if [[ ! -f "$PY_EX/echo_agent.py" || ! -f "$PY_EX/agent.py" || ! -f "$PY_EX/client.py" ]]; then
  SDIST_DIR="$PEERS/sdist"
  rm -rf "$SDIST_DIR"; mkdir -p "$SDIST_DIR"
  log "pip download sdist $PY_PKG==$PY_VER"
  "$VENV_PY" -m pip download --quiet --disable-pip-version-check \
    --no-binary :all: --no-deps "$PY_PKG==$PY_VER" -d "$SDIST_DIR"
  TARBALL="$(ls "$SDIST_DIR"/*.tar.gz 2>/dev/null | head -n1 || true)"
  [[ -n "$TARBALL" ]] || die "no sdist tarball downloaded into $SDIST_DIR"
  log "extracting examples/ from $(basename "$TARBALL") -> $PY_EX"
  TMPX="$(mktemp -d "$PEERS/.extract.XXXXXX")"
  tar -xzf "$TARBALL" -C "$TMPX"
  EXDIR="$(find "$TMPX" -maxdepth 2 -type d -name examples | head -n1 || true)"
  [[ -n "$EXDIR" ]] || die "sdist $TARBALL has no examples/ directory"
  rm -rf "$PY_EX"
  mv "$EXDIR" "$PY_EX"
  rm -rf "$TMPX"
  for f in echo_agent.py agent.py client.py; do
    [[ -f "$PY_EX/$f" ]] || die "sdist examples/ lacks $f"
  done
fi

# ---------------------------------------------------------------- Node
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"
INSTALLED_NODE_VER="$(node -p "require('$NODE_SDK/package.json').version" 2>/dev/null || true)"
if [[ "$INSTALLED_NODE_VER" == "$NODE_VER" && -f "$NODE_AGENT" ]]; then
  log "$NODE_PKG@$NODE_VER already installed"
else
  log "npm install --prefix $PEERS/node $NODE_PKG@$NODE_VER"
  mkdir -p "$PEERS/node"
  npm install --prefix "$PEERS/node" --no-audit --no-fund --save-exact \
    --loglevel=error "$NODE_PKG@$NODE_VER" >&2
fi
[[ -f "$NODE_AGENT" ]] || die "missing $NODE_AGENT after npm install (package layout changed?)"
if [[ -f "$NODE_SDK/dist/examples/client.js" ]]; then
  log "found $NODE_SDK/dist/examples/client.js"
else
  log "note: $NODE_PKG@$NODE_VER ships no dist/examples/client.js"
fi

# ---------------------------------------------------------------- ACP v2 peers
# The TypeScript SDK with the experimental v2 API, apart from the v1 examples' SDK.
if [[ "$(node -p "require('$NODE_V2_SDK/package.json').version" 2>/dev/null || true)" == "$NODE_V2_VER" ]]; then
  log "$NODE_PKG@$NODE_V2_VER already installed in $PEERS/node-v2"
else
  log "npm install --prefix $PEERS/node-v2 $NODE_PKG@$NODE_V2_VER"
  mkdir -p "$PEERS/node-v2"
  npm install --prefix "$PEERS/node-v2" --no-audit --no-fund --save-exact \
    --loglevel=error "$NODE_PKG@$NODE_V2_VER" >&2
fi
if [[ "$(node -p "require('$PEERS/node-v2/node_modules/ws/package.json').version" 2>/dev/null || true)" != "$WS_VER" ]]; then
  log "npm install --prefix $PEERS/node-v2 ws@$WS_VER"
  npm install --prefix "$PEERS/node-v2" --no-audit --no-fund --save-exact \
    --loglevel=error "$NODE_PKG@$NODE_V2_VER" "ws@$WS_VER" >&2
fi
# The Rust SDK's v2 examples: the crate's published source (fetched by cargo into its
# registry cache), copied and built with the crate's own Cargo.lock.
if [[ -x "$RUST_V2_AGENT" && -x "$RUST_V2_CLIENT" ]]; then
  log "$RUST_SDK_PKG $RUST_SDK_VER v2 examples already built"
else
  command -v cargo >/dev/null || die "cargo not found"
  FETCH="$PEERS/rust-sdk/fetch"
  mkdir -p "$FETCH/src"
  printf '[package]\nname = "fetch-acp-sdk"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n' \
    "$RUST_SDK_PKG" "$RUST_SDK_VER" > "$FETCH/Cargo.toml"
  echo 'fn main() {}' > "$FETCH/src/main.rs"
  log "cargo fetch $RUST_SDK_PKG $RUST_SDK_VER"
  cargo fetch --quiet --manifest-path "$FETCH/Cargo.toml"
  CRATE_TOML="$(cargo metadata --quiet --format-version 1 --manifest-path "$FETCH/Cargo.toml" |
    "$PYTHON" -c "import json,sys; m=json.load(sys.stdin); print(next(p['manifest_path'] for p in m['packages'] if p['name']=='$RUST_SDK_PKG' and p['version']=='$RUST_SDK_VER'))")"
  rm -rf "$RUST_SDK_SRC"
  cp -r "$(dirname "$CRATE_TOML")" "$RUST_SDK_SRC"
  log "building simple_agent_v2 and v2_one_shot_client (about 2 minutes)"
  cargo build --quiet --release --locked --manifest-path "$RUST_SDK_SRC/Cargo.toml" \
    --features process,stdio,unstable_protocol_v2 --example simple_agent_v2 --example v2_one_shot_client
fi
for peer in "$RUST_V2_AGENT" "$RUST_V2_CLIENT"; do
  [[ -x "$peer" ]] || die "missing $peer after cargo build"
done

# ---------------------------------------------------------------- today's adapters
version_of() { node -p "require('$PEERS/adapters/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [[ "$(version_of "$CLAUDE_PKG")" == "$CLAUDE_VER" && "$(version_of "$CODEX_PKG")" == "$CODEX_VER" &&
      "$(version_of "$CODEX_BIN_PKG")" == "$CODEX_BIN_VER" ]]; then
  log "$CLAUDE_PKG@$CLAUDE_VER and $CODEX_PKG@$CODEX_VER already installed"
else
  # The binaries the adapters drive come with them (Claude Code, Codex: ~800 MB on disk);
  # codex-acp's Codex is pinned too (its package asks for ^0.166).
  log "npm install --prefix $PEERS/adapters $CLAUDE_PKG@$CLAUDE_VER $CODEX_PKG@$CODEX_VER $CODEX_BIN_PKG@$CODEX_BIN_VER"
  mkdir -p "$PEERS/adapters"
  npm install --prefix "$PEERS/adapters" --no-audit --no-fund --save-exact \
    --loglevel=error "$CLAUDE_PKG@$CLAUDE_VER" "$CODEX_PKG@$CODEX_VER" "$CODEX_BIN_PKG@$CODEX_BIN_VER" >&2
fi
for agent in "$CLAUDE_AGENT" "$CODEX_AGENT"; do
  [[ -f "$agent" ]] || die "missing $agent after npm install (package layout changed?)"
done

check_installed || die "post-install check failed"
printf '%s\n' "$WANT" > "$STAMP"
log "done: peers installed in $PEERS"
log "  python: $VENV_PY $PY_EX/echo_agent.py | agent.py | client.py"
log "  node:   node $NODE_AGENT"
log "  claude: node $CLAUDE_AGENT"
log "  codex:  node $CODEX_AGENT"
log "  v2:     $RUST_V2_AGENT, $RUST_V2_CLIENT, $NODE_V2_SDK (tests/agents/ts_v2_client.mjs)"
