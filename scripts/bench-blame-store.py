#!/usr/bin/env python3
"""`acp-journal blame --store` of a 2 000-line file against SESSIONS sessions in an S3 store
(docs/BENCHMARKS.md, blame).

Starts s3s-fs (scripts/install-object-stores.sh) on loopback behind a relay of our own that
counts the requests and the bytes the store sends; records SESSIONS sessions of our edit agent
(tests/agents/edit_agent.py) with `--store`, each one turn replacing two lines of the file (a
tool call's `diff`); commits; writes the index anew (`index rebuild`: the recording run's end is
bounded, so its index may lag); then a teammate (an empty journal directory and cache) runs
`blame big.py --json --store`: cold (nothing of the store on its disk) and warm (again, with its
local copy), RUNS times each, with BINARY and, when given, BEFORE (a build that reads every
session's journal). Prints wall times, requests and bytes.
Usage: scripts/bench-blame-store.py BINARY [SESSIONS] [RUNS] [BEFORE]
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blame_bench  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.abspath(sys.argv[1])
sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
before = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
LINES = blame_bench.LINES
KEY, SECRET = "acpjbenchkey", "acpjbenchsecret0123456789"
s3s = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                   "acp-journal/object-stores/s3s-fs-0.14.1/bin/s3s-fs")

work = tempfile.mkdtemp(prefix="bench-blame-store-")
repo, data = os.path.join(work, "repo"), os.path.join(work, "s3")
os.makedirs(repo)
os.makedirs(os.path.join(data, "bench"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


port = free_port()
server = subprocess.Popen([s3s, "--host", "127.0.0.1", "--port", str(port), "--access-key", KEY,
                           "--secret-key", SECRET, data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)

# The relay: every request (an HTTP/1.1 request line from the client) and every byte back.
counted = {"requests": 0, "bytes": 0}
lock = threading.Lock()


def pump(src, dst, requests):
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            with lock:
                if requests:
                    counted["requests"] += chunk.count(b" HTTP/1.1\r\n")
                else:
                    counted["bytes"] += len(chunk)
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
relay_port = listener.getsockname()[1]


def accept():
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", port))
        threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()


threading.Thread(target=accept, daemon=True).start()


def s3_env(p):
    return dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{p}", AWS_ACCESS_KEY_ID=KEY,
                AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")


url = "s3://bench/team"
blame_bench.repository(repo)
recorded = blame_bench.record([binary, "--journal-dir", os.path.join(work, "journals"), "--store", url,
                               "--ship-interval", "1", "--"], repo, sessions, s3_env(port))
# The recording run's end is bounded: its index may not have caught up with every session.
# The index written anew from the store's journals, so that the teammate's blame measures the
# index's answer, not a fallback to the journals.
start = time.monotonic()
rebuilt = subprocess.run([binary, "--journal-dir", os.path.join(work, "indexer"), "--store", url, "index", "rebuild"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=s3_env(port))
if rebuilt.returncode != 0:
    server.terminate()
    sys.exit(f"index rebuild: {rebuilt.stderr.decode()}")
print(f"index rebuilt in {time.monotonic() - start:.1f} s")
stored = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data) for f in fs)
print(f"{sessions} sessions recorded in {recorded:.1f} s; the store holds {stored / 1e6:.1f} MB")


def blame(build, name):
    teammate = os.path.join(work, f"teammate-{name}")
    answers = []
    for run in range(runs):
        shutil.rmtree(teammate, ignore_errors=True)
        for phase in ("cold", "warm"):
            with lock:
                counted.update(requests=0, bytes=0)
            t = time.monotonic()
            out = subprocess.run([build, "--journal-dir", os.path.join(teammate, "journals"), "--store", url,
                                  "blame", os.path.join(repo, "big.py"), "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=dict(s3_env(relay_port), XDG_CACHE_HOME=os.path.join(teammate, "cache")))
            took = time.monotonic() - t
            if out.returncode != 0:
                sys.exit(f"{name}: {out.stderr.decode()}")
            with lock:
                seen = dict(counted)
            rows = json.loads(out.stdout)
            credited = sum(1 for r in rows if r["agent"])
            answers.append(out.stdout)
            print(f"{name} {phase} run {run + 1}: {took * 1000:.0f} ms, {seen['requests']} requests, "
                  f"{seen['bytes'] / 1e6:.2f} MB from the store; {credited} of {LINES} lines the agent's")
            for said in out.stderr.decode().splitlines():
                print(f"  {said}")
    return answers


after = blame(binary, "index")
if before:
    old = blame(before, "journals")
    print("same answers:", all(a == b for a, b in zip(after, old)))
server.terminate()
print(f"(left in {work})")
