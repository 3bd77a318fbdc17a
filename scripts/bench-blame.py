#!/usr/bin/env python3
"""`acp-journal blame` of a 2 000-line file against 1 000 sessions (docs/BENCHMARKS.md).

Makes a git repository with a 2 000-line file, then one proxy run of our edit agent
(tests/agents/edit_agent.py) holding SESSIONS sessions, each with one turn that replaces two
lines of the file (a tool call's `diff`, as claude-agent-acp reports its edits) and some
message text; commits; then times `blame` (text and --json) RUNS times each. Prints the
figures. Usage: scripts/bench-blame.py [BINARY] [SESSIONS] [RUNS]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blame_bench  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(root, "target/release/acp-journal")
sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
LINES = blame_bench.LINES

work = tempfile.mkdtemp(prefix="bench-blame-")
repo, journals = os.path.join(work, "repo"), os.path.join(work, "journals")
os.makedirs(repo)
env = blame_bench.GIT_ENV
blame_bench.repository(repo)
recorded = blame_bench.record([binary, "--journal-dir", journals, "--"], repo, sessions)
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(journals) for f in fs)


def timed(*args):
    out = []
    for _ in range(runs):
        t = time.monotonic()
        done = subprocess.run([binary, "--journal-dir", journals, "blame", "big.py", *args], cwd=repo,
                              check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        out.append(time.monotonic() - t)
    return out, done.stdout


git_times = []
for _ in range(runs):
    t = time.monotonic()
    subprocess.run(["git", "blame", "--line-porcelain", "-M", "-C", "big.py"], cwd=repo, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    git_times.append(time.monotonic() - t)
text_times, _ = timed()
json_times, rows = timed("--json")
credited = sum(1 for r in json.loads(rows) if r["agent"])
ms = lambda ts: " ".join(f"{t * 1000:.0f}" for t in ts)
print(f"{sessions} sessions recorded in {recorded:.1f} s; journals {size / 1e6:.1f} MB; {credited} of {LINES} lines the agent's")
print(f"git blame -M -C alone (ms, {runs} runs): {ms(git_times)}")
print(f"acp-journal blame (ms; the first run is the first read of the journals since they were written): {ms(text_times)}")
print(f"acp-journal blame --json (ms): {ms(json_times)}")
print(f"(left in {work})")
