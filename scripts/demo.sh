#!/usr/bin/env bash
# The acp-journal demo, from a fresh checkout: builds the proxy and the example agent and client,
# runs one two-turn session through the proxy, then inspects the journal it wrote.
#
#   scripts/demo.sh
#
# Journals go to demo-journals/ in the repository (gitignored, wiped at each run).
set -euo pipefail

cd "$(dirname "$0")/.."
store=demo-journals
proxy=target/debug/acp-journal
agent=target/debug/examples/agent
token=ghp_exampleexampleexampleexample0000 # the fake token examples/client.rs sends

section() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

section "Building the proxy and the examples"
cargo build --quiet --examples --bin acp-journal
rm -rf "$store"

section "A session through the proxy: client -> $proxy -> $agent"
echo "\$ cargo run -q --example client -- $proxy --journal-dir $store -- $agent"
echo "  (lines starting with '  |' are the agent's stderr, passed through the proxy)"
cargo run -q --example client -- "$proxy" --journal-dir "$store" -- "$agent"

section "acp-journal list"
"$proxy" --journal-dir "$store" list

section "acp-journal verify"
"$proxy" --journal-dir "$store" verify

if ! command -v zstd >/dev/null; then
    echo
    echo "zstd is not installed: skipping the look inside the journal files."
    exit 0
fi

segment=$(find "$store/sessions" -type f -name '*.acpj.zst' | sort | head -n 1)
if [[ -z $segment ]]; then
    echo "no session journal was written under $store/sessions" >&2
    exit 1
fi

section "The session journal is plain zstd + JSON lines: $segment"
echo "\$ zstd -dc $segment | head -n 8 | cut -c1-200"
zstd -dc "$segment" | head -n 8 | cut -c1-200 || true # (|| true: head may cut the pipe short)

if command -v jq >/dev/null; then
    section "Its messages, one per record"
    filter='select(.msg) | {seq, from, id: .msg.id, method: .msg.method, update: .msg.params.update.sessionUpdate} | del(..|nulls)'
    echo "\$ zstd -dc $segment | jq -c '$filter' | head -n 12"
    zstd -dc "$segment" | jq -c "$filter" | head -n 12 || true
fi

section "Secrets: the agent got GITHUB_TOKEN, the journal did not"
echo "The agent's log above shows the token it received (first and last 4 characters)."
echo "\$ zstd -dc $segment | grep -o '\"env\":\\[{[^}]*}\\]'"
zstd -dc "$segment" | grep -o '"env":\[{[^}]*}\]'
hits=$(zstd -dc "$store"/sessions/*/*.acpj.zst "$store"/connections/*.acpj.zst | grep -c "$token" || true)
if [[ $hits != 0 ]]; then
    echo "FAIL: the token appears $hits times in the journals" >&2
    exit 1
fi
echo "OK: '$token' appears nowhere in $store (every journal file checked)."
