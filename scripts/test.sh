#!/usr/bin/env bash
# The tests, in two tiers (README "Set up"). Both run on cargo-nextest: the full tier installs
# the pinned version where it is missing, the fast tier says how.
#
#   scripts/test.sh --fast   the loop to run after every change: fmt, clippy, the unit tests and
#                            the integration tests that need nothing but the built binary, Python 3
#                            and the repository (nextest profile `fast` in .config/nextest.toml).
#                            Installs nothing.
#   scripts/test.sh          every test (CI runs exactly this, through .ci/run): first installs
#                            what the rest need, then the same checks and every unit, integration
#                            and doc test (nextest profile `full`), scripts/module-deps.sh and a
#                            bounded fuzz run (scripts/fuzz.sh; ACPJ_FUZZ_SECONDS=0 skips it).
#                            The installs that wait on the network and the fuzz build (at the
#                            lowest priority) run beside the builds and the tests.
#
# The full tier's installs: the pinned reference peers (Python and TypeScript ACP SDKs, with their
# HTTP and WebSocket transports) into .peers/ (a link to ~/.cache/acp-journal/peers, per machine,
# when the checkout has none), Debian's chromium and a pinned puppeteer-core into
# .peers/browser/ (the HTML export's and serve's page's browser tests; about 30 s the first time,
# nothing after), Debian's nginx (serve behind a reverse proxy; the tests run their own, no
# service is left running), the OTLP backend for the tracing tests (Arize Phoenix from PyPI:
# about 2.5 minutes and 850 MB the first time) and the S3-compatible object stores of the fleet
# tests (Garage and s3s-fs from crates.io, built unoptimized once per machine outside the
# checkout: about 7 minutes the first time).
#
# Both tiers print how long each phase took; the full tier also prints each test binary's time
# and its 20 slowest tests (from nextest's JUnit report, target/nextest/full/junit.xml). The
# figures go in docs/BENCHMARKS.md ("The test suite"): the suite's time is measured as the
# relay's is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tier=full
case "${1:-}" in
    "") ;;
    --fast) tier=fast ;;
    *)
        echo "usage: scripts/test.sh [--fast]" >&2
        exit 2
        ;;
esac

NEXTEST_VERSION=0.9.143
if [[ $tier == fast ]] && ! command -v cargo-nextest >/dev/null; then
    echo "[test] cargo-nextest is missing: cargo install cargo-nextest --version $NEXTEST_VERSION --locked" >&2
    exit 2
fi

# The tests' scratch directories (TMPDIR) go on a tmpfs when /dev/shm is one with room: on a disk
# mounted with online discard, as this project's machines are, removing the ten thousand
# journals of one test took a minute (a tenth of a second on tmpfs; docs/BENCHMARKS.md, "The test
# suite"). What the tests assert holds on any file system; the disk-full tests mount their own
# tmpfs. ACPJ_TEST_TMPDIR=DIR chooses another parent.
scratch_parent=${ACPJ_TEST_TMPDIR:-}
if [[ -z $scratch_parent ]] && [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] \
    && (($(df -k --output=avail /dev/shm | tail -n 1) > 8 * 1024 * 1024)); then
    scratch_parent=/dev/shm
fi
TMPDIR=$(mktemp -d "${scratch_parent:-${TMPDIR:-/tmp}}/acp-journal-tests.XXXXXX")
export TMPDIR

# Each phase's name and its seconds, printed as a table when the run ends, passed or failed
# (in a file: the phases that run in the background record theirs too).
phases="$TMPDIR/phases"
: >"$phases"
started=$SECONDS
phase() { # name command...
    local name=$1 start=$SECONDS status=0
    shift
    echo "[test] $name" >&2
    "$@" || status=$?
    printf '%s\t%s\n' "$name" "$((SECONDS - start))" >>"$phases"
    return "$status"
}

# A phase that runs beside the others (installs that wait on the network, a build at the lowest
# priority); its output is held until `join` waits for it and prints it.
declare -A background_pids
background() { # name command...
    local name=$1
    shift
    phase "$name (beside)" "$@" >"$TMPDIR/background.${name// /_}" 2>&1 &
    background_pids[$name]=$!
}
join() { # name
    local name=$1 start=$SECONDS status=0
    wait "${background_pids[$name]}" || status=$?
    unset "background_pids[$name]"
    cat "$TMPDIR/background.${name// /_}" >&2
    printf '%s\t%s\n' "waiting for $name" "$((SECONDS - start))" >>"$phases"
    return "$status"
}
report() {
    local status=$?
    {
        echo
        echo "[test] $tier tier: phases (seconds)"
        local name seconds
        while IFS=$'\t' read -r name seconds; do
            printf '  %-40s %5s\n' "$name" "$seconds"
        done <"$phases"
        printf '  %-40s %5s\n' "total" "$((SECONDS - started))"
        if [[ $tier == full && -e target/nextest/full/junit.xml ]]; then
            echo
            python3 scripts/slowest-tests.py -n 20 target/nextest/full/junit.xml
        fi
        if ((status != 0)); then
            echo "[test] FAILED (exit $status)"
        fi
    } >&2
    local pid
    for pid in "${background_pids[@]}"; do # a failed run leaves no build behind
        pkill -TERM -P "$pid" 2>/dev/null || true
        kill "$pid" 2>/dev/null || true
    done
    rm -rf "$TMPDIR"
}
trap report EXIT

# zstd reads journals in the tests; prlimit and unshare (util-linux) give the disk-full tests a
# file-size limit and a small tmpfs; faketime (libfaketime) runs a fleet host whose wall clock is
# a minute off.
apt_tools() {
    local tool package
    for tool in zstd:zstd prlimit:util-linux unshare:util-linux faketime:faketime; do
        package=${tool#*:}
        tool=${tool%%:*}
        if ! command -v "$tool" >/dev/null; then
            echo "[test] installing $package" >&2
            apt-get install -y -qq "$package" >/dev/null
        fi
    done
}
fmt() {
    cargo fmt --all -- --check
    cargo fmt --manifest-path fuzz/Cargo.toml -- --check
}

network_installs() {
    phase "install: apt tools" apt_tools &&
        phase "install: peers" scripts/install-peers.sh &&
        phase "install: chromium" scripts/install-chromium.sh &&
        phase "install: nginx" scripts/install-nginx.sh &&
        phase "install: OTLP backend" scripts/install-otlp-backend.sh
}

if [[ $tier == full ]]; then
    # The reference peers (with the browser's driver and Phoenix) are kept per machine, as the
    # object stores are: a checkout without .peers gets a link to the machine's, so that a fresh
    # clone (CI's) finds what an earlier run installed. An existing .peers is used as it is.
    if [[ ! -e .peers && ! -L .peers ]]; then
        machine_peers="${XDG_CACHE_HOME:-$HOME/.cache}/acp-journal/peers"
        mkdir -p "$machine_peers"
        ln -s "$machine_peers" .peers
    fi
    # What waits on the network (Debian's packages, npm's and PyPI's) installs beside what
    # waits on the CPU (the object stores' and this crate's builds), and the fuzz build, a
    # CPU-bound build of its own, takes what the others leave (nice 19) until the fuzz run
    # needs it: on a machine that has built nothing, the installs, the stores and the fuzz
    # build were 40 minutes one after the other.
    background installs network_installs
    background "fuzz build" nice -n 19 scripts/fuzz.sh build
    phase "install: object stores" scripts/install-object-stores.sh
    # Unoptimized (`--debug`): a test runner that starts processes and reads their output runs
    # as fast either way, and its optimized build was ten minutes of a fresh machine's run.
    if ! command -v cargo-nextest >/dev/null; then
        phase "install: cargo-nextest" \
            cargo install cargo-nextest --version "$NEXTEST_VERSION" --locked --debug --quiet
    fi
fi

phase "fmt" fmt
phase "clippy" cargo clippy --all-targets --locked -- -D warnings
phase "build (tests)" cargo nextest run --locked --profile "$tier" --no-run

if [[ $tier == fast ]]; then
    # A test that reaches for an install fails at its fixture (tests/it/util.rs: `full_tier`).
    export ACPJ_TEST_TIER=fast
    phase "unit and integration tests" cargo nextest run --locked --profile fast
    exit 0
fi

# The unit and integration tests in one run: the unit tests fill the cores while the integration
# tests wait on their peers (each binary's own time is in the report at the end).
rm -f target/nextest/full/junit.xml
join installs
phase "unit and integration tests" cargo nextest run --locked --profile full
phase "doc tests" cargo test --locked --doc
phase "module-deps" scripts/module-deps.sh
join "fuzz build"
phase "fuzz run" scripts/fuzz.sh run
