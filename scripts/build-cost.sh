#!/usr/bin/env bash
# What a user waits for at `cargo install --path .`: a clean release build of each revision
# given, one after the other in one run, each from an exported tree (`git archive`) with a target
# dir of its own, removed once measured.
#
#   scripts/build-cost.sh REV...        e.g. scripts/build-cost.sh 07baee2 HEAD
#
# Prints, per revision: the build's wall time and CPU time (user + system, of cargo and every
# compiler it ran: far less sensitive to other work on the machine than the wall time), the
# crates compiled (cargo's "Compiling" lines: each package once per kind of build, a build
# script's package too), the size of the binary as
# built and stripped, and the machine's load average at the start and the end (the build uses
# every core: a busy machine makes it slower). BUILD_COST_DIR (default target/build-cost) holds
# the trees and each build's log while it runs; a revision's tree and target dir (about 1.5 GB)
# are removed after its build; BUILD_COST_KEEP=DIR keeps each binary there first, as
# DIR/acp-journal-<commit> (for scripts/callgrind-turns.sh, say).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -ge 1 ]] || {
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

work=${BUILD_COST_DIR:-target/build-cost}
mkdir -p "$work"
work=$(cd "$work" && pwd)
rows=()
for rev in "$@"; do
    commit=$(git rev-parse --short "$rev^{commit}")
    tree="$work/$commit"
    rm -rf "$tree"
    mkdir -p "$tree"
    git archive "$commit" | tar -x -C "$tree"
    echo "[build-cost] $rev ($commit): cargo build --release --locked" >&2
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    start=$SECONDS
    (cd "$tree" && CARGO_TARGET_DIR="$tree/target" /usr/bin/time -f '%U %S' -o "$work/$commit.cpu" \
        cargo build --release --locked) >"$work/$commit.log" 2>&1 || {
        tail -n 30 "$work/$commit.log" >&2
        exit 1
    }
    seconds=$((SECONDS - start))
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    cpu=$(awk '{ printf "%d", $1 + $2 }' "$work/$commit.cpu")
    crates=$(grep -c '^ *Compiling ' "$work/$commit.log")
    binary="$tree/target/release/acp-journal"
    size=$(stat -c %s "$binary")
    strip -o "$tree/stripped" "$binary"
    stripped=$(stat -c %s "$tree/stripped")
    if [[ -n ${BUILD_COST_KEEP:-} ]]; then
        mkdir -p "$BUILD_COST_KEEP"
        cp "$binary" "$BUILD_COST_KEEP/acp-journal-$commit"
    fi
    rows+=("$rev ($commit)|$((seconds / 60)) min $((seconds % 60)) s|$((cpu / 60)) min $((cpu % 60)) s|$crates|$size|$stripped|$load_before / $load_after")
    rm -rf "$tree"
done

echo "| revision | clean release build | its CPU time | crates compiled | binary (bytes) | stripped (bytes) | load average, start / end |"
echo "|---|---:|---:|---:|---:|---:|---|"
for row in "${rows[@]}"; do
    echo "| ${row//|/ | } |"
done
