#!/usr/bin/env bash
# Bounded fuzz run of every target in fuzz/ (called by scripts/test.sh; see fuzz/README.md).
#
#   scripts/fuzz.sh [build|run]   build the targets, run them, or (no argument) both
#
#   ACPJ_FUZZ_SECONDS   seconds per target (default 30; 6 targets = 180 s); 0 skips the run
#   ACPJ_FUZZ_TARGETS   space-separated targets (default: all, from `cargo fuzz list`)
#   ACPJ_FUZZ_TARGET_DIR  cargo's target directory for the fuzz build (default: one per machine,
#                       ~/.cache/acp-journal/fuzz-target, as the peers and the object stores are)
#
# The fuzz build compiles every dependency again, optimized and instrumented for coverage (the
# longest phase of the full tier on a clean checkout). Its target directory is kept per machine,
# so a fresh clone builds only this crate and the targets: this crate's own artifacts are removed
# before each build (a checkout elsewhere would add its own beside them), and the directory is
# emptied when it passes 8 GiB (dependencies of older lock files).
#
# Runs on the machine's stable toolchain: `-s none` needs no nightly (no sanitizer: the code
# fuzzed is safe Rust, and the one C library it calls, zstd, is not instrumented anyway);
# `-a` keeps debug assertions, so integer overflow panics. Inputs the fuzzer finds go to
# fuzz/target/corpus/<target> (not committed); a crash leaves its input in fuzz/artifacts/ and
# fails the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

steps=${1:-build run}
case "$steps" in
    build | run | "build run") ;;
    *)
        echo "usage: scripts/fuzz.sh [build|run]" >&2
        exit 2
        ;;
esac
seconds="${ACPJ_FUZZ_SECONDS:-30}"
if [[ "$seconds" == 0 ]]; then
    echo "[fuzz] skipped (ACPJ_FUZZ_SECONDS=0)" >&2
    exit 0
fi

target_dir="${ACPJ_FUZZ_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/acp-journal/fuzz-target}"
flags=(-a -s none --target-dir "$target_dir")
if [[ $steps == build* ]]; then
    CARGO_FUZZ_VERSION=0.13.2
    if [[ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
        echo "[fuzz] installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
        # Unoptimized: it only drives cargo and the fuzzer (as cargo-nextest, scripts/test.sh).
        cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --debug --quiet
    fi
    mkdir -p "$target_dir"
    if (($(du -sk "$target_dir" | cut -f1) > 8 * 1024 * 1024)); then
        echo "[fuzz] $target_dir is over 8 GiB: emptied" >&2
        rm -rf "${target_dir:?}"/*
    fi
    find "$target_dir" -mindepth 3 -maxdepth 4 \( -name '*acp_journal*' -o -name 'acp-journal-*' \) \
        -exec rm -rf {} +
    cargo fuzz build "${flags[@]}"
fi
[[ $steps == *run ]] || exit 0

targets="${ACPJ_FUZZ_TARGETS:-$(cargo fuzz list)}"
for target in $targets; do
    work="fuzz/target/corpus/$target"
    mkdir -p "$work" "fuzz/corpus/$target"
    options=(
        -max_total_time="$seconds"
        -timeout=10           # one input: a hang fails the run
        -rss_limit_mb=1024    # memory stays bounded
        -malloc_limit_mb=512  # and no single allocation is huge
        -max_len=65536
        -print_final_stats=1
    )
    if [[ -f "fuzz/$target.dict" ]]; then
        options+=(-dict="fuzz/$target.dict")
    fi
    log="fuzz/target/$target.log"
    echo "[fuzz] $target for ${seconds}s" >&2
    if ! cargo fuzz run "${flags[@]}" "$target" "$work" "fuzz/corpus/$target" -- "${options[@]}" \
        >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "[fuzz] $target FAILED (whole log: $log; the input is in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" |
        sed "s/^/[fuzz] $target /" >&2
done
