#!/bin/sh
# Instructions the stdio proxy executes per prompt turn, counted exactly by callgrind (no
# timing: the same on a busy machine as on a quiet one).
#
#   scripts/callgrind-turns.sh BINARY... [-- TURNS]      # TURNS defaults to 4000
#   scripts/callgrind-turns.sh --flood N BINARY...        # instructions per message instead
#
# For each acp-journal BINARY: a Python client and agent (tests/agents/turns_peers.py) play
# TURNS prompt turns through it (each answered with an agent_message_chunk, a usage_update and
# the response, as the proxy bench's `__turns` agent does), once with 0 turns and once with
# TURNS, under `valgrind --tool=callgrind` (the proxy's process only: the agent is not traced).
# Printed: the instructions of the whole run, and per turn the difference over TURNS (the
# start and the end cost the same in both runs). With `--flood N`: one prompt answered with N
# updates of a mix (the peers' `--flood`; 170 to 260 bytes a line), against one answered with
# none: instructions per message. Needs valgrind (apt: valgrind) and python3.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
binaries=""
turns=4000
flood=""
while [ $# -gt 0 ]; do
  case "$1" in
    --flood) shift; flood=$1 ;;
    --) shift; turns=${1:-4000}; break ;;
    *) binaries="$binaries $1" ;;
  esac
  shift
done
[ -n "$binaries" ] || { echo "usage: $0 BINARY... [-- TURNS]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The instructions (Ir) of one run of BINARY with N turns (with --flood: one turn of N updates).
instructions() {
  rm -rf "$work/store" "$work/out"
  if [ -n "$flood" ]; then set -- "$1" 1 --flood "$2"; else set -- "$1" "$2"; fi
  bin=$1 prompts=$2
  shift 2
  python3 "$here/tests/agents/turns_peers.py" client "$prompts" -- \
    valgrind --tool=callgrind --callgrind-out-file="$work/out" \
    "$bin" --journal-dir "$work/store" -- python3 "$here/tests/agents/turns_peers.py" agent "$@" \
    >/dev/null 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
  sed -n 's/^summary: //p; s/^totals: //p' "$work/out" | head -1
}

count=${flood:-$turns}
unit=$([ -n "$flood" ] && echo "messages" || echo "turns")
printf '%-50s %16s %16s\n' binary "Ir ($count $unit)" "Ir per ${unit%s}"
for bin in $binaries; do
  idle=$(instructions "$bin" 0)
  busy=$(instructions "$bin" "$count")
  printf '%-50s %16s %16s\n' "$bin" "$busy" "$(( (busy - idle) / count ))"
done
