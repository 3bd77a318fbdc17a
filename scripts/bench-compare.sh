#!/usr/bin/env bash
# Before/after benchmark: build the `cargo bench` binaries (proxy, load, inspect) of two
# revisions, run them back to back on this machine in one go, and print the key figures side by
# side with head/base ratios.
#
#   scripts/bench-compare.sh BASE_REV [HEAD_REV]      # HEAD_REV defaults to HEAD
#
# What it does:
#   1. Resolves both revisions to commits and exports each one's tree (`git archive`: no
#      worktree, nothing added to .git) to $BENCH_COMPARE_DIR/<commit> (default
#      target/bench-compare/), each with its own target dir (<commit>/target). They are kept: a
#      second compare of the same commits builds nothing. Each takes about 2.5 GB, so only the
#      BENCH_COMPARE_KEEP (default 3) most recently compared revisions are kept, this run's two
#      among them; `rm -rf target/bench-compare` frees all of it.
#   2. Builds each revision's bench binaries with `cargo bench --no-run` (the `bench` profile, as
#      `cargo bench` does). A new target dir is first seeded with a copy of this checkout's
#      target/release, when there is one, so dependencies are not compiled again
#      (BENCH_COMPARE_SEED=0 turns that off).
#   3. Runs the benches, BASE then HEAD, interleaved: the proxy bench BENCH_COMPARE_ROUNDS times
#      each (default 2: BASE HEAD BASE HEAD), load and inspect once each (they already take the
#      best of 3 or 5 inside). Each run's stdout (its markdown report) and stderr are kept in
#      $BENCH_COMPARE_DIR/results/<time>/.
#   4. Prints a table of the key figures (the median over the rounds when there are several):
#      base, head, head/base. The figures are read from the reports' markdown tables by their row
#      and column names; a figure one report lacks is shown as "—". BENCH_COMPARE_ALL=1 prints
#      every number of every table instead of the selection. Then, from head's proxy runs alone
#      (the base's binary plays the same floods in them, BENCH_PROXY_BASE): CPU per message of
#      the minimal relay, the base's acp-journal and head's, per writing mode (bulk, line) and
#      size (100 k, 1 M), with base/relay, head/relay and head/base.
#
# Knobs (environment):
#   BENCH_QUICK=1            the benches' own ~10x smaller runs (passed through; leave it unset for
#                            full runs: load and inspect take any value, even 0, as quick)
#   BENCH_COMPARE_BENCHES    which benches, in order (default "proxy load inspect")
#   BENCH_COMPARE_ROUNDS     rounds of the proxy bench per revision (default 2)
#   BENCH_COMPARE_DIR        the exported trees, their builds and the results
#                            (default <repo>/target/bench-compare)
#   BENCH_COMPARE_KEEP       how many revisions' trees and builds to keep (default 3, at least 2)
#   BENCH_COMPARE_CONDUCTOR  1 (default): the proxy bench's section on the official ACP conductor,
#                            one binary for both revisions (BENCH_CONDUCTOR, else this checkout's
#                            target/peers, installed by scripts/bench-peers.sh when missing: a
#                            one-off `cargo install`); 0: without it (the bench
#                            leaves it out when it cannot install it: the runs see a `cargo` that
#                            fails)
#   BENCH_PROXY_ARGS, ACP_JOURNAL_LOG   passed through to the proxy bench
#
# Duration, on a 2-vCPU machine: building is one release build per new revision (about 1-2 min
# each when seeded, none when already built). The runs take 2 x (ROUNDS x proxy + load +
# inspect). With BENCH_QUICK=1 BENCH_COMPARE_ROUNDS=1 BENCH_COMPARE_CONDUCTOR=0 a compare took
# 214 s, 51 s of them running (proxy 6-7 s, load 1 s, inspect 12-25 s per revision; see
# docs/BENCHMARKS.md); full runs use ~10x the counts (the 1 GB inspect session, 1 M proxy
# messages), so expect each to take roughly 10x longer (not measured here).
#
# Needs git, cargo, jq (the bench executables' paths) and python3 (the table).
set -euo pipefail

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 && $1 != -* ]] || usage

for tool in git cargo jq python3; do
  command -v "$tool" >/dev/null || { echo "bench-compare: needs $tool" >&2; exit 2; }
done
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BASE=$(git rev-parse --verify "$1^{commit}")
HEAD_=$(git rev-parse --verify "${2:-HEAD}^{commit}")
WORK="${BENCH_COMPARE_DIR:-$REPO/target/bench-compare}"
BENCHES="${BENCH_COMPARE_BENCHES:-proxy load inspect}"
ROUNDS="${BENCH_COMPARE_ROUNDS:-2}"
RESULTS="$WORK/results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RESULTS"
log() { echo "[bench-compare] $*" >&2; }
started=$SECONDS

# --- 1 and 2: an exported tree and a build per revision ----------------------------------------------

# Prints the path of each bench executable of revision $1, as `name path` lines.
build() {
  local rev=$1 wt="$WORK/$1"
  if [[ ! -f $wt.exported ]]; then
    log "exporting $(git log -1 --format='%h %s' "$rev" | cut -c1-70) to $wt"
    rm -rf "$wt"
    mkdir -p "$wt"
    git archive --format=tar "$rev" | tar -x -C "$wt"
    touch "$wt.exported"
    if [[ ${BENCH_COMPARE_SEED:-1} != 0 && -d $REPO/target/release && ! -d $wt/target/release ]]; then
      log "seeding $wt/target/release from $REPO/target/release"
      mkdir -p "$wt/target"
      cp -a "$REPO/target/release" "$wt/target/release"
      # Keep the dependencies only: the exported files are older than the copied artifacts, so
      # cargo would take this checkout's build of acp-journal itself for the revision's.
      (cd "$wt" && CARGO_TARGET_DIR="$wt/target" cargo clean --quiet --release -p acp-journal)
    fi
  fi
  touch "$wt.exported" # the last use, for pruning
  local args=() b
  for b in $BENCHES; do args+=(--bench "$b"); done
  log "building ${BENCHES// /, } at ${rev:0:9} (target dir $wt/target)"
  local t=$SECONDS
  (cd "$wt" && CARGO_TARGET_DIR="$wt/target" cargo bench --locked --no-run \
      --message-format json-render-diagnostics "${args[@]}") \
    | jq -r 'select(.reason == "compiler-artifact" and .target.kind == ["bench"] and .executable)
             | "\(.target.name) \(.executable)"'
  log "built ${rev:0:9} in $((SECONDS - t)) s"
}

declare -A EXE
while read -r name path; do EXE[base/$name]=$path; done < <(build "$BASE")
while read -r name path; do EXE[head/$name]=$path; done < <(build "$HEAD_")
for b in $BENCHES; do
  for side in base head; do
    [[ -n ${EXE[$side/$b]:-} ]] || { log "no '$b' bench at $side"; exit 1; }
  done
done

# The revisions beyond the BENCH_COMPARE_KEEP most recently used, oldest first, go.
keep=${BENCH_COMPARE_KEEP:-3}
((keep >= 2)) || keep=2
while read -r marker; do
  stale=${marker%.exported}
  [[ $stale == "$WORK/$BASE" || $stale == "$WORK/$HEAD_" ]] && continue
  log "removing the tree and build of ${stale##*/} (BENCH_COMPARE_KEEP=$keep)"
  rm -rf "$stale" "$marker"
done < <(ls -1t "$WORK"/*.exported 2>/dev/null | tail -n +$((keep + 1)))

# --- the conductor --------------------------------------------------------------------------------

BENCH_ENV=()
if [[ " $BENCHES " == *" proxy "* ]]; then
  if [[ ${BENCH_COMPARE_CONDUCTOR:-1} == 0 ]]; then
    mkdir -p "$WORK/no-cargo"
    printf '#!/bin/sh\necho "bench-compare: no conductor (BENCH_COMPARE_CONDUCTOR=0)" >&2\nexit 1\n' \
      > "$WORK/no-cargo/cargo"
    chmod +x "$WORK/no-cargo/cargo"
    BENCH_ENV+=(PATH="$WORK/no-cargo:$PATH")
    log "the proxy bench runs without the ACP conductor"
  else
    if [[ -z ${BENCH_CONDUCTOR:-} ]]; then
      scripts/bench-peers.sh
      BENCH_CONDUCTOR="$REPO/target/peers/bin/agent-client-protocol-conductor"
    fi
    BENCH_ENV+=(BENCH_CONDUCTOR="$BENCH_CONDUCTOR")
    log "ACP conductor: $BENCH_CONDUCTOR"
  fi
fi

# --- 3: the runs, interleaved ------------------------------------------------------------------

# run SIDE BENCH ROUND: the bench as `cargo bench` runs it (in its package root, with `--bench`).
run() {
  local side=$1 bench=$2 round=$3 rev wt out
  [[ $side == base ]] && rev=$BASE || rev=$HEAD_
  wt="$WORK/$rev"
  out="$RESULTS/$bench-$side-$round"
  log "run: $bench, $side (${rev:0:9}), round $round"
  local t=$SECONDS
  # The head's proxy bench also plays its prompt turns and its CPU-per-message floods through
  # the base's binary, in the same run (BENCH_PROXY_BASE): those figures do not depend on the
  # base having that measurement.
  local base_proxy=()
  [[ $side == head && $bench == proxy ]] \
    && base_proxy=(BENCH_PROXY_BASE="$WORK/$BASE/target/release/acp-journal")
  (cd "$wt" && env "${BENCH_ENV[@]}" "${base_proxy[@]}" CARGO_TARGET_DIR="$wt/target" \
      CARGO_MANIFEST_DIR="$wt" "${EXE[$side/$bench]}" --bench >"$out.md" 2>"$out.log") \
    || { log "$bench failed at $side; see $out.log"; tail -5 "$out.log" >&2; exit 1; }
  log "  $((SECONDS - t)) s"
}

runs_started=$SECONDS
for b in $BENCHES; do
  rounds=1
  [[ $b == proxy ]] && rounds=$ROUNDS
  for ((r = 1; r <= rounds; r++)); do
    run base "$b" "$r"
    run head "$b" "$r"
  done
done
runs_took=$((SECONDS - runs_started))

# --- 4: the table ------------------------------------------------------------------------------

echo "# Bench compare: base ${BASE:0:9} vs head ${HEAD_:0:9}"
echo
echo "- base: $(git log -1 --format='%h %s' "$BASE" | cut -c1-100)"
echo "- head: $(git log -1 --format='%h %s' "$HEAD_" | cut -c1-100)"
echo "- machine: $(nproc) CPUs, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- scale: ${BENCH_QUICK:+BENCH_QUICK=$BENCH_QUICK, }proxy rounds $ROUNDS (interleaved base, head); runs took ${runs_took} s, all in all $((SECONDS - started)) s"
echo "- full reports: $RESULTS/<bench>-<base|head>-<round>.md"
python3 - "$RESULTS" "$ROUNDS" ${BENCH_COMPARE_ALL:+all} $BENCHES <<'PY'
import re, statistics, sys
from pathlib import Path

results, rounds, rest = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
show_all = bool(rest) and rest[0] == "all"
benches = rest[1:] if show_all else rest

# A figure: a number first (after a "text: " lead, if any), with its unit or comment after it.
NUM = re.compile(r"^[<>≤≥~]?\s*(-?\d+(?:\.\d+)?)")
# Cells that name a row rather than measure it (with the label cells): the run's size.
KEY_COLUMNS = {"messages", "updates in the session"}

def cells_of(line):
    """The cells of a table row (a `|` between backquotes is text)."""
    cells, cell, code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
    return cells + [cell.strip()]

def name_of(cell):
    """A label cell without what may vary from run to run: timings and sizes in it."""
    cell = re.sub(r"\s*\([^)]*\d[^)]*\)", "", cell)
    return re.sub(r"\d+(?:\.\d+)? ?(?:[KMG]i?B|B|ms|s)\b", "…", cell).strip()

def figures(text):
    """Every number of every markdown table: {(section, row label, column): value}."""
    out, section, header = {}, "", None
    for line in text.splitlines():
        if line.startswith("#"):
            section, header = line.lstrip("# ").strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = cells_of(line)
        if header is None:
            header = [c.strip("*` ") for c in cells]
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        label, values = [], {}
        for col, cell in zip(header, cells):
            plain = cell.replace("**", "").replace("`", "").strip()
            m = NUM.match(plain.rsplit(": ", 1)[-1])
            numeric = m is not None
            if col in KEY_COLUMNS:
                label.append(f"{plain} {col}")
            elif not numeric:
                if plain and plain not in ("—", "-") and col:
                    label.append(name_of(plain))
            else:
                values[col] = float(m.group(1))
        for col, v in values.items():
            key = (section, " / ".join(label), col)
            while key in out:  # the same row twice: number them
                key = (key[0], key[1] + " (again)", key[2])
            out[key] = v
    return out

# The selection: (bench, section, row, column) regexes, and a short name for the figure.
PICK = [
    ("proxy", r"Latency", r"^unpinned / acp-journal$", r"added/hop p50", "added latency/hop p50, unpinned (µs)"),
    ("proxy", r"Latency", r"^unpinned / acp-journal$", r"added/hop p99", "added latency/hop p99, unpinned (µs)"),
    ("proxy", r"Latency", r"^all on one CPU / acp-journal$", r"added/hop p50", "added latency/hop p50, one CPU (µs)"),
    ("proxy", r"Latency", r"^all on one CPU / acp-journal$", r"added/hop p99", "added latency/hop p99, one CPU (µs)"),
    ("proxy", r"Latency", r"^unpinned / minimal relay$", r"added/hop p50", "minimal relay: added/hop p50, unpinned (µs)"),
    ("proxy", r"Throughput", r"^acp-journal / \d+ messages$", r"^MB/s$", "throughput acp-journal (MB/s)"),
    ("proxy", r"Throughput", r"^acp-journal / \d+ messages$", r"^messages/s$", "throughput acp-journal (messages/s)"),
    ("proxy", r"Throughput", r"^minimal relay / \d+ messages$", r"^MB/s$", "throughput minimal relay (MB/s)"),
    ("proxy", r"Throughput", r"^acp-journal / \d+ messages / all threads$", r"CPU µs/message", "CPU of acp-journal (µs/message)"),
    ("proxy", r"Journal size", r"^acp-journal journal / \d+ messages$", r"^bytes/message$", "journal (bytes/message)"),
    ("proxy", r"Peak RSS", r".", r"^peak RSS", "peak RSS acp-journal (MiB)"),
    ("proxy", r"conductor", r"^throughput$", r"^ACP conductor", "ACP conductor throughput (MB/s)"),
    ("proxy", r"Prompt turns", r"^acp-journal$", r"^turns/s$", "prompt turns acp-journal (turns/s)"),
    ("proxy", r"Prompt turns", r"^acp-journal$", r"^CPU µs/turn$", "prompt turns acp-journal (CPU µs/turn)"),
    ("proxy", r"Prompt turns", r"^acp-journal$", r"^store bytes/turn$", "prompt turns acp-journal (store bytes/turn)"),
    ("proxy", r"Prompt turns", r"^acp-journal \(base build\)$", r"^turns/s$", "prompt turns, the base's binary in head's run (turns/s)"),
    ("proxy", r"Prompt turns", r"^acp-journal \(base build\)$", r"^CPU µs/turn$", "prompt turns, the base's binary in head's run (CPU µs/turn)"),
    ("proxy", r"Prompt turns", r"^acp-journal \(base build\)$", r"^store bytes/turn$", "prompt turns, the base's binary in head's run (store bytes/turn)"),
    ("load", r"", r".", r"session/load → response", "session/load → response (ms)"),
    ("load", r"", r".", r"proxy peak RSS", "load: proxy peak RSS (MiB)"),
    ("inspect", r"", r"^list over", r"^acp-journal$", "list (ms)"),
    ("inspect", r"", r"^search over", r"^acp-journal$", "search (s)"),
    ("inspect", r"", r"^search over", r"^baseline$", "zstd -dc | grep -c (s)"),
    ("inspect", r"", r"^(show|export|search)", r"^time$", "time (s)"),
    ("inspect", r"", r"^(show|export|search)", r"^peak RSS$", "peak RSS (MB)"),
]

def load(bench, side):
    runs = [figures(p.read_text()) for p in sorted(results.glob(f"{bench}-{side}-*.md"))]
    keys = list(dict.fromkeys(k for r in runs for k in r))
    return {k: statistics.median([r[k] for r in runs if k in r]) for k in keys}

def fmt(v):
    if v is None:
        return "—"
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"

print()
print("| bench | figure | base | head | head/base |")
print("|---|---|---:|---:|---:|")
for bench in benches:
    base, head = load(bench, "base"), load(bench, "head")
    keys = list(dict.fromkeys([*base, *head]))
    rows = []
    if show_all:
        rows = [(k, " · ".join(x for x in k if x)) for k in keys]
    else:
        for b, sec, row, col, name in PICK:
            if b != bench:
                continue
            for k in keys:
                if re.search(sec, k[0], re.I) and re.search(row, k[1]) and re.search(col, k[2]):
                    detail = k[1] if bench == "inspect" and name.endswith(("(s)", "(MB)")) and not k[1].startswith(("list", "search over")) else ""
                    n = re.search(r"(\d+) (messages|updates in the session)", k[1])
                    size = f"{n.group(1)} {n.group(2).split()[0]}" if n else ""
                    extra = ", ".join(x for x in (detail, size) if x)
                    rows.append((k, f"{name}{f' [{extra}]' if extra else ''}"))
    for k, name in rows:
        b, h = base.get(k), head.get(k)
        ratio = f"{h / b:.2f}" if b and h is not None else "—"
        name = name.replace("|", "\\|")
        print(f"| {bench} | {name} | {fmt(b)} | {fmt(h)} | {ratio} |")

# CPU per message against the minimal relay, from head's runs only: the base's binary played the
# same floods in them, interleaved with the relay and head's binary.
if "proxy" in benches:
    cells = {}
    for (sec, row, col), v in load("proxy", "head").items():
        m = re.match(r"^(bulk|line) / (\d+) messages / (.+)$", row)
        if m and re.search(r"CPU per message against the minimal relay", sec) and col == "CPU µs/message, all threads":
            cells[(m[1], int(m[2]), m[3])] = v
    if cells:
        print()
        print("CPU µs/message of the whole proxy process (all threads), in head's runs; base = the base's binary in the same runs:")
        print()
        print("| writes | messages | minimal relay | base | head | base/relay | head/relay | head/base |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        def ratio(a, b):
            return f"{a / b:.2f}" if a is not None and b else "—"
        def f3(v):
            return "—" if v is None else f"{v:.3f}"
        for w, n in sorted({(w, n) for w, n, _ in cells}, key=lambda k: (k[0] != "bulk", k[1])):
            relay = cells.get((w, n, "minimal relay"))
            b = cells.get((w, n, "acp-journal (base build)"))
            h = cells.get((w, n, "acp-journal"))
            print(f"| {w} | {n} | {f3(relay)} | {f3(b)} | {f3(h)} | {ratio(b, relay)} | {ratio(h, relay)} | {ratio(h, b)} |")
PY
