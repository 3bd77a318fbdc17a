#!/usr/bin/env bash
# Run every test from a fresh checkout: installs the pinned reference peers (Python and
# TypeScript ACP SDKs, with their HTTP and WebSocket transports) into .peers/, Debian's chromium
# and a pinned puppeteer-core into .peers/browser/ (the HTML export's and serve's page's browser
# tests; about 30 s the first time, nothing after), Debian's nginx
# (serve behind a reverse proxy; the tests run their own, no service is left running) and the
# OTLP backend for the tracing tests (Arize Phoenix from PyPI: about 2.5 minutes and 850 MB the
# first time), the S3-compatible object stores of the fleet tests (Garage and s3s-fs from
# crates.io, built once per machine outside the checkout: about 14 minutes the first time), then
# lints and runs the unit and integration tests, then a bounded fuzz run
# (scripts/fuzz.sh; ACPJ_FUZZ_SECONDS=0 skips it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v zstd >/dev/null || { echo "[test] installing zstd" >&2; apt-get install -y -qq zstd >/dev/null; }
# prlimit and unshare (util-linux) give the disk-full tests a file-size limit and a small tmpfs.
command -v prlimit >/dev/null && command -v unshare >/dev/null \
  || { echo "[test] installing util-linux" >&2; apt-get install -y -qq util-linux >/dev/null; }
# faketime (libfaketime) runs a fleet host whose wall clock is a minute off.
command -v faketime >/dev/null \
  || { echo "[test] installing faketime" >&2; apt-get install -y -qq faketime >/dev/null; }
scripts/install-peers.sh
scripts/install-chromium.sh
scripts/install-nginx.sh
scripts/install-otlp-backend.sh
scripts/install-object-stores.sh
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked
scripts/module-deps.sh
scripts/fuzz.sh
