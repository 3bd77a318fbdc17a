#!/usr/bin/env bash
# Re-record the sample journals in journals/ from the pinned reference peers (and our scripted
# agent, for a turn with a subagent): the example
# client drives `acp-journal -- <agent>` through two prompt turns; the Rust SDK's ACP v2
# one-shot client drives its v2 example agent through one. The samples are committed;
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
# A turn that delegates to a subagent, as claude-agent-acp 0.101 sends it (our scripted agent).
record scripted-subagents "$PWD/$peers/venv/bin/python" "$PWD/tests/agents/scripted_agent.py" subagents
rm -rf journals/rust-v2-agent
echo "== recording journals/rust-v2-agent: ACP v2" >&2
v2=$PWD/$peers/rust-sdk/src-5.0.0/target/release/examples
(cd /tmp && "$v2/v2_one_shot_client" --command \
    "$OLDPWD/target/debug/acp-journal --journal-dir $OLDPWD/journals/rust-v2-agent -- $v2/simple_agent_v2" \
    "What ends a turn in ACP v2?") >/dev/null
target/debug/acp-journal verify --journal-dir journals/rust-v2-agent
target/debug/acp-journal verify --journal-dir journals/python-echo-agent
target/debug/acp-journal verify --journal-dir journals/typescript-agent
target/debug/acp-journal verify --journal-dir journals/scripted-subagents
