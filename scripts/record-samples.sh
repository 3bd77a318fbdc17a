#!/usr/bin/env bash
# Re-record the sample journals in journals/ from the pinned reference peers: the example
# client drives `acp-journal -- <agent>` through two prompt turns. The samples are committed;
# tests read them (format stability) and the docs quote them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-peers.sh
cargo build -q --bin acp-journal --example client
peers=.peers
record() {
  local name=$1; shift
  rm -rf "journals/$name"
  echo "== recording journals/$name: $*" >&2
  (cd /tmp && "$OLDPWD/target/debug/examples/client" "$OLDPWD/target/debug/acp-journal" \
      --journal-dir "$OLDPWD/journals/$name" -- "$@") >/dev/null
}
record python-echo-agent "$PWD/$peers/venv/bin/python" "$PWD/$peers/py-examples/echo_agent.py"
record typescript-agent node "$PWD/$peers/node/node_modules/@agentclientprotocol/sdk/dist/examples/agent.js"
target/debug/acp-journal verify --journal-dir journals/python-echo-agent
target/debug/acp-journal verify --journal-dir journals/typescript-agent
