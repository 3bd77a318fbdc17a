#!/bin/sh
# The dependency graph between the top-level modules of src/ (`crate::X` paths, comments and
# tests included), one line per module, then a check that it has no cycle (tsort); then the same
# check inside each module directory, between its submodules (`super::Y`, `super::{Y, ..}` and
# `crate::X::Y` paths).
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

status=0
for dir in $(ls -d */ | tr -d /); do
  subs=$(ls "$dir" | grep -E '\.rs$|^[a-z_]+$' | sed 's/\.rs$//' | grep -vx mod | sort -u)
  pairs=""
  for s in $subs; do
    files=$(ls -d "$dir/$s.rs" "$dir/$s" 2>/dev/null || true)
    # Paths that name a sibling: `super::Y`, `crate::dir::Y`, and each item of `super::{..}`.
    named=$( (grep -rhoE "(super|crate::$dir)::[a-z_]+" $files | sed 's/.*:://'
              grep -rhoE "(super|crate::$dir)::\{[^}]*\}" $files | sed 's/^[^{]*{//; s/}$//' \
                | tr ',' '\n' | sed 's/^ *//; s/::.*//') || true)
    deps=$(echo "$named" | grep -xF "$subs" | grep -vx "$s" | sort -u | tr '\n' ' ' || true)
    pairs="$pairs $s $s"
    for d in $deps; do pairs="$pairs $d $s"; done
  done
  cycle=$(echo "$pairs" | tsort 2>&1 >/dev/null || true)
  if [ -n "$cycle" ]; then
    echo "cycle between the submodules of $dir:" >&2
    echo "$cycle" | grep -v '^tsort: -:.*loop' | sed 's/^tsort: /  /' >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "no cycle between submodules"
exit $status
