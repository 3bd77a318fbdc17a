#!/usr/bin/env python3
"""The core's shape, counted (issue 40; printed in docs/ARCHITECTURE.md, "The core's measures").

  scripts/core-measures.sh             # builds examples/core_path, runs it under callgrind

Counted over the non-test files of src/proto/ (tests.rs, *_tests.rs and #[cfg(test)] items left out):
- files on a prompt's path: the files of src/proto/ with code that runs while the core handles a
  plain session/prompt (in), an agent_message_chunk of its turn and its answer (out), as callgrind
  sees a debug build of examples/core_path (nothing inlined: every function is where its file is);
- session-keyed collections: fields of the core's structs that are a map or set keyed by a session
  ID (SessionId, AgentSessionId, or a tuple holding one), or a list or queue of them;
- the largest structs (named fields) and types by methods (fns of their inherent impls), and every
  type whose inherent impls are in more than one file;
- who owns the session's state (issue 56): the `pub(super)` fields of `Session` and of the context
  (`Cx`), the files that write the session table (call a `SessionTable` method that takes
  `&mut self`, or a `Session` one on `sessions[slot]`), the `too_many_arguments` allowances, the functions that take the whole context
  (a `&mut Cx` or `&Cx` parameter);
- the bounds: non-test files of the core over 700 lines, functions of the core over 80.
"""
import os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(ROOT, "src", "proto")


def core_files():
    for d, _, files in os.walk(CORE):
        for f in sorted(files):
            if f.endswith(".rs") and f != "tests.rs" and not f.endswith("_tests.rs"):
                yield os.path.join(d, f)


def past_braces(text, k):
    """The index just past the brace block that opens at `text[k]`."""
    depth = 0
    while k < len(text):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        k += 1
        if depth == 0:
            break
    return k


def strip(text):
    """The text without comments, string literals and #[cfg(test)] items."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'r#"(?:.|\n)*?"#', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    while True:
        j = text.find("#[cfg(test)]", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        k = j + len("#[cfg(test)]")
        if re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?[a-z_]\w*\s*:[^:]", text[k:]):
            # A field: up to the comma that ends it (outside <>, () and []), or its struct's end.
            depth, e = 0, k
            while e < len(text) and not (depth == 0 and text[e] in ",}"):
                depth += {"<": 1, "(": 1, "[": 1, ">": -1, ")": -1, "]": -1}.get(text[e], 0)
                e += 1
            i = e + (text[e : e + 1] == ",")
            continue
        semi, brace = text.find(";", k), text.find("{", k)
        if brace < 0 or (0 <= semi < brace):
            i = semi + 1
            continue
        i = past_braces(text, brace)
    return "".join(out)


def blocks(text, head):
    """(match, body) of every item whose header matches `head`, body between its braces."""
    for m in re.finditer(head, text):
        start = text.find("{", m.end() - 1)
        yield m, text[start + 1 : past_braces(text, start) - 1]


def top_level(body):
    """The body's text at depth 0 (inside the item's braces, outside any nested ones)."""
    out, depth = [], 0
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def fields(body):
    """Named fields: `name: Type` at depth 0, split on commas outside <>, () and []."""
    parts, depth, cur = [], 0, []
    for ch in top_level(body):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    found = []
    for p in parts:
        p = re.sub(r"#\[[^\]]*\]", "", p).strip()
        m = re.match(r"(?:pub(?:\([^)]*\))?\s+)?([a-z_][a-z0-9_]*)\s*:\s*(.+)$", p, re.S)
        if m:
            found.append((m.group(1), " ".join(m.group(2).split())))
    return found


SESSION = r"\b(?:SessionId|AgentSessionId)\b"
COLLECTION = re.compile(r"\b(HashMap|HashSet|IndexMap|BTreeMap|BTreeSet|Vec|VecDeque)<\s*(\([^)]*\)|[^,<>]+(?:<[^<>]*>)?)")


def session_keyed(ty):
    m = COLLECTION.search(ty)
    return bool(m and re.search(SESSION, m.group(2)))


def measure_structs():
    structs, impls = {}, {}
    for path in core_files():
        rel = os.path.relpath(path, ROOT)
        text = strip(open(path).read())
        for m, body in blocks(text, r"\bstruct\s+([A-Z]\w*)(?:<[^>{]*>)?\s*\{"):
            structs[m.group(1)] = (rel, fields(body))
        # Inherent impls only (`impl Trait for T` is left out).
        for m, body in blocks(text, r"(?m)^\s*impl(?:<[^>{]*>)?\s+([A-Z]\w*)(?:<[^>{]*>)?\s*\{"):
            fns = len(re.findall(r"\bfn\s+\w+", top_level(body)))
            files, count = impls.get(m.group(1), (set(), 0))
            files.add(rel)
            impls[m.group(1)] = (files, count + fns)
    return structs, impls


def table_writers():
    """Files (other than sessions.rs and sessions/session.rs) calling a `SessionTable` method that takes `&mut self`,
    or a `Session` one on a session the table is indexed for by its slot (`sessions[slot]`)."""
    # The table and its sessions: `sessions.rs` (`SessionTable`) and its child
    # `sessions/session.rs` (`Session`, its fields private).
    own = ("sessions.rs", os.path.join("sessions", "session.rs"))
    text = "\n".join(strip(open(os.path.join(CORE, f)).read()) for f in own)
    def mutating(item):
        found = set()
        for _, body in blocks(text, r"(?m)^impl\s+" + item + r"\s*\{"):
            found |= set(re.findall(r"fn\s+(\w+)(?:<[^>]*>)?\s*\(\s*&mut\s+self", top_level(body)))
        return found
    writes, through_slot = mutating("SessionTable"), mutating("Session")
    call = re.compile(r"\bsessions\s*\.\s*(" + "|".join(sorted(writes)) + r")\s*\("
                      r"|\bsessions\s*\[[^\]]*\]\s*\.\s*(" + "|".join(sorted(through_slot)) + r")\s*\(")
    found = set()
    for path in core_files():
        rel = os.path.relpath(path, ROOT)
        if any(rel.endswith("proto/" + f) for f in own):
            continue
        if call.search(strip(open(path).read())):
            found.add(rel[len("src/proto/"):-3])
    return sorted(found)


def ownership():
    structs, _ = measure_structs()
    raw = {}
    for path in core_files():
        text = strip(open(path).read())
        # Fields the rest of the core reaches: `pub(super)` in a file of `src/proto` itself
        # reaches all of it; in a file of a module's folder (`sessions/session.rs`), only that
        # module (the table) does, and a field the rest of the core reaches says so itself.
        nested = os.path.dirname(os.path.relpath(path, CORE)) != ""
        visible = r"pub\((?:crate|in crate::proto)\)|pub(?!\()" + ("" if nested else r"|pub\(super\)")
        for m, body in blocks(text, r"\bstruct\s+(Session|Cx)\s*\{"):
            raw[m.group(1)] = len(re.findall(r"(?m)^\s*(?:" + visible + r")\s+\w+\s*:", top_level(body)))
    allows, whole = 0, []
    for path in core_files():
        rel = os.path.relpath(path, ROOT)[len("src/proto/"):-3]
        text = strip(open(path).read())
        allows += len(re.findall(r"too_many_arguments", open(path).read()))
        for m in re.finditer(r"\bfn\s+(\w+)(?:<[^>{]*>)?\s*\(([^{;]*?)\)\s*(?:->[^{;]*)?[{;]", text, re.S):
            if re.search(r":\s*&(?:mut\s+)?Cx\b", m.group(2)):
                whole.append(f"{rel}::{m.group(1)}")
    return raw, table_writers(), allows, whole


def bounds():
    """Non-test files of the core over 700 lines, functions over 80 (with their lines)."""
    files, fns = [], []
    for path in core_files():
        rel = os.path.relpath(path, ROOT)[len("src/proto/"):]
        text = open(path).read()
        n = text.count("\n")
        if n > 700:
            files.append((rel, n))
        lines = text.split("\n")
        for i, line in enumerate(lines):
            m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?fn\s+(\w+)", line)
            if not m:
                continue
            indent = len(line) - len(line.lstrip())
            for j in range(i, len(lines)):
                if lines[j].rstrip() == " " * indent + "}" or (j > i and lines[j].rstrip().endswith(";") and lines[i].rstrip().endswith(";")):
                    break
                if j == i and line.rstrip().endswith(";"):
                    break
            if j - i + 1 > 80:
                fns.append((f"{rel[:-3]}::{m.group(1)}", j - i + 1))
    return files, fns


def prompt_path():
    subprocess.run(["cargo", "build", "--quiet", "--example", "core_path"], cwd=ROOT, check=True)
    binary = os.path.join(ROOT, "target", "debug", "examples", "core_path")
    ways = {}
    for way in ("way_in", "update_out", "answer_out"):
        out = f"/tmp/core-measures.{os.getpid()}.{way}"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        f"--toggle-collect=core_path::{way}", binary],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = subprocess.run(["callgrind_annotate", "--threshold=100", out], check=True,
                              capture_output=True, text=True).stdout
        os.unlink(out)
        ways[way] = sorted(set(re.findall(r"src/proto/[\w/]+\.rs", text)))
    return ways


def main():
    structs, impls = measure_structs()
    ways = prompt_path() if "--no-path" not in sys.argv else None
    if ways:
        both = sorted(set().union(*ways.values()))
        print(f"files of the core on a prompt's path: {len(both)} in and out "
              f"(prompt in {len(ways['way_in'])}, update out {len(ways['update_out'])}, "
              f"answer out {len(ways['answer_out'])})")
        for way, files in ways.items():
            print(f"  {way}: " + " ".join(f[len('src/proto/'):-3] for f in files))
    keyed = [(name, f, ty) for name, (rel, fs) in sorted(structs.items())
             for f, ty in fs if session_keyed(ty)]
    print(f"session-keyed collections: {len(keyed)}")
    for name, f, ty in keyed:
        print(f"  {name}.{f}: {ty}")
    by_fields = sorted(structs.items(), key=lambda kv: -len(kv[1][1]))[:3]
    print("largest structs by fields: " + ", ".join(
        f"{n} {len(fs)} ({rel[len('src/proto/'):]})" for n, (rel, fs) in by_fields))
    by_fns = sorted(impls.items(), key=lambda kv: -kv[1][1])[:3]
    print("most methods: " + ", ".join(f"{n} {c}" for n, (_, c) in by_fns))
    spread = sorted((n, sorted(fs)) for n, (fs, _) in impls.items() if len(fs) > 1)
    print(f"types whose impl spans files: {len(spread)}" + "".join(
        f"\n  {n}: " + " ".join(f[len('src/proto/'):-3] for f in fs) for n, fs in spread))
    raw, writers, allows, whole = ownership()
    print(f"fields the rest of the core reaches: Session {raw.get('Session', 0)}, Cx {raw.get('Cx', 0)}")
    # The route resolves a line's session and writes what it decided; the proxy owns the table
    # and dispatches (its inputs besides lines: the catalog's facts, held lines released).
    # The route is route.rs and the files of its folder (route/requests.rs, route/relayed.rs).
    others = [w for w in writers if w not in ("route", "proxy") and not w.startswith("route" + os.sep)]
    print(f"files that write the session table (besides sessions.rs and its session.rs): {len(writers)}"
          + (": " + " ".join(writers) if writers else "")
          + f"; besides the route and the table's owner (route.rs and its folder, proxy.rs) too: {len(others)}")
    print(f"too_many_arguments allowances: {allows}")
    print(f"functions taking the whole context: {len(whole)}")
    files, fns = bounds()
    print("files over 700 lines: " + (", ".join(f"{f} {n}" for f, n in files) or "none"))
    print("functions over 80 lines: " + (", ".join(f"{f} {n}" for f, n in fns) or "none"))


main()
