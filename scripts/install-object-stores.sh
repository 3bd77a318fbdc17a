#!/usr/bin/env bash
# Install the S3-compatible object stores the fleet tests (tests/it/store*.rs) start on loopback,
# pinned, from crates.io, outside the checkout (they take minutes to build, so they are kept per
# machine, not per clone):
#   - Garage 2.5.0: a distributed, replicated store run in production (AGPL-3.0: a test tool
#     here, run as a separate process, never linked). It ignores conditional writes. Built with
#     the features the tests use (the sqlite metadata engine, its bundled C library) and
#     without the others (Prometheus metrics, K2V).
#   - s3s-fs 0.14.1: an S3 server over a directory that enforces `If-None-Match` / `If-Match`
#     (the lease and fencing tests).
# Both are built unoptimized (`--debug`): the tests move kilobytes through them, and the two
# build in 7 min 14 s on 2 cores (8 min 40 s of CPU, beside other builds) where the optimized
# builds took 22 min on a machine that had built nothing (docs/BENCHMARKS.md, "The test
# suite"). The first time only: they are kept per machine.
# Idempotent: a no-op when the pinned versions are there.
#
# Env overrides: STORES_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/acp-journal/object-stores),
# FORCE=1.
set -euo pipefail

DIR="${STORES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/acp-journal/object-stores}"

install_one() { # crate version binary [cargo install flags...]
  local crate=$1 ver=$2 bin=$3
  shift 3
  local root="$DIR/$crate-$ver"
  if [[ "${FORCE:-0}" != 1 && -x "$root/bin/$bin" ]]; then
    return 0
  fi
  echo "[object-stores] building $crate $ver into $root (minutes, once per machine)" >&2
  mkdir -p "$DIR"
  local target="$DIR/.target-$crate"
  CARGO_TARGET_DIR="$target" cargo install -q --locked --debug --root "$root" --version "$ver" "$crate" "$@"
  rm -rf "$target"
  test -x "$root/bin/$bin"
}

install_one s3s-fs 0.14.1 s3s-fs --features binary
install_one garage 2.5.0 garage --no-default-features --features bundled-libs,sqlite
