"""What scripts/bench-blame.py and scripts/bench-blame-store.py share: a git repository with a
LINES-line file, and SESSIONS sessions of our edit agent (tests/agents/edit_agent.py) recorded
through the proxy, each one turn replacing two lines of the file (a tool call's `diff`, as
claude-agent-acp reports its edits), then committed.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = 2000
# git as the person, with nothing of the user's configuration.
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="Ann Person", GIT_AUTHOR_EMAIL="ann@example.com",
               GIT_COMMITTER_NAME="Ann Person", GIT_COMMITTER_EMAIL="ann@example.com",
               GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")


def person_line(n):
    return f"value_{n} = compute({n}, 'line {n} of the file as the person wrote it')\n"


def repository(repo):
    """A repository in `repo` whose first commit holds big.py, LINES lines; its `git`."""
    def git(*args):
        subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, stdout=subprocess.DEVNULL)

    git("init", "-q", "-b", "main")
    with open(os.path.join(repo, "big.py"), "w") as f:
        f.writelines(person_line(n) for n in range(LINES))
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    return git


def record(proxy, repo, sessions, env=None):
    """`sessions` sessions through `proxy` (the proxy's command line up to and with `--`), session
    s rewriting lines 2s and 2s+1 (mod the file) as one diff; then commits. Returns the seconds
    the proxy ran."""
    run = subprocess.Popen([*proxy, sys.executable, os.path.join(ROOT, "tests/agents/edit_agent.py")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, env=env)

    def request(i, method, params):
        run.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        run.stdin.flush()
        for line in run.stdout:
            msg = json.loads(line)
            if msg.get("id") == i and "method" not in msg:
                return msg

    start = time.monotonic()
    request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    for s in range(sessions):
        sid = request(1 + 2 * s, "session/new", {"cwd": repo, "mcpServers": []})["result"]["sessionId"]
        a = (2 * s) % LINES
        old = "".join(person_line(n) for n in (a, a + 1))
        new = "".join(f"value_{n} = compute_faster({n}, 'line {n}, session {s}')\n" for n in (a, a + 1))
        text = f"Speed up lines {a} and {a + 1}\nreplace big.py\n{old}---\n{new}."
        request(2 + 2 * s, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    run.stdin.close()
    run.wait()
    took = time.monotonic() - start
    subprocess.run(["git", "commit", "-q", "-am", "faster"], cwd=repo, env=GIT_ENV, check=True,
                   stdout=subprocess.DEVNULL)
    return took
