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

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(root, "target/release/acp-journal")
sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
LINES = 2000

work = tempfile.mkdtemp(prefix="bench-blame-")
repo, journals = os.path.join(work, "repo"), os.path.join(work, "journals")
os.makedirs(repo)
env = dict(os.environ, GIT_AUTHOR_NAME="Ann Person", GIT_AUTHOR_EMAIL="ann@example.com",
           GIT_COMMITTER_NAME="Ann Person", GIT_COMMITTER_EMAIL="ann@example.com",
           GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")


def git(*args):
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL)


git("init", "-q", "-b", "main")
path = os.path.join(repo, "big.py")
with open(path, "w") as f:
    f.writelines(f"value_{n} = compute({n}, 'line {n} of the file as the person wrote it')\n" for n in range(LINES))
git("add", "-A")
git("commit", "-q", "-m", "base")

proxy = subprocess.Popen([binary, "--journal-dir", journals, "--",
                          sys.executable, os.path.join(root, "tests/agents/edit_agent.py")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)


def request(i, method, params):
    proxy.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
    proxy.stdin.flush()
    for line in proxy.stdout:
        msg = json.loads(line)
        if msg.get("id") == i and "method" not in msg:
            return msg


start = time.monotonic()
request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
for s in range(sessions):
    sid = request(1 + 2 * s, "session/new", {"cwd": repo, "mcpServers": []})["result"]["sessionId"]
    # Session s rewrites lines 2s and 2s+1 (mod the file), as one diff.
    a = (2 * s) % LINES
    old = "".join(f"value_{n} = compute({n}, 'line {n} of the file as the person wrote it')\n" for n in (a, a + 1))
    new = "".join(f"value_{n} = compute_faster({n}, 'line {n}, session {s}')\n" for n in (a, a + 1))
    text = f"Speed up lines {a} and {a + 1}\nreplace big.py\n{old}---\n{new}."
    request(2 + 2 * s, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
proxy.stdin.close()
proxy.wait()
recorded = time.monotonic() - start
git("commit", "-q", "-am", "faster")
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
