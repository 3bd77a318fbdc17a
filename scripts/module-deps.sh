#!/bin/sh
# The dependency graph between the top-level modules of src/ (`crate::X` paths, comments and
# tests included), one line per module, then a check that it has no cycle (tsort).
set -eu
cd "$(dirname "$0")/../src"
pairs=""
for m in $(ls | sed 's/\.rs$//' | sort -u | grep -vx 'lib\|main'); do
  files=$(ls -d "$m.rs" "$m" 2>/dev/null || true)
  deps=$(grep -rhoE 'crate::[a-z_]+' $files | sed 's/crate:://' | grep -vx "$m" | sort -u | tr '\n' ' ' || true)
  echo "$m -> $deps"
  pairs="$pairs $m $m"
  for d in $deps; do pairs="$pairs $d $m"; done
done
if echo "$pairs" | tsort 2>&1 >/dev/null | grep -q .; then
  echo "cycle between top-level modules" >&2
  exit 1
fi
echo "no cycle"
