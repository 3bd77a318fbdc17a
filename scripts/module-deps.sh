#!/bin/sh
# The import graph of the library's sources, checked for cycles.
#
#   scripts/module-deps.sh [SRC_DIR]     (default: the repository's src/)
#
# Every .rs file under SRC_DIR is a node, named by its path without `.rs`: `proto/mod`,
# `proto/restart`, `proto/history/terminals`, `render` (src/render.rs), `lib`. An edge `a -> b`
# says that file a names something that file b defines. Each name is resolved, much as rustc
# resolves a path, to the FILE that defines the item:
#   - the names come from `use` declarations (nested groups, `self`, `as`, `pub use`,
#     `pub(..) use`, `use` inside a fn body too) and from paths written in code: `super::full(..)`,
#     `crate::net::tls::server_config(..)`, `super::super::vocab::X`, `envelope::peek(..)` after a
#     `use ..::envelope`, `loading::Step` in the mod.rs that declares `mod loading;`;
#   - a path is walked segment by segment from `crate`, `super`, `self` or a name in scope (a
#     first segment that is none of these is another crate, the prelude or a generic: no edge).
#     A module is followed into its file (`x.rs` or `x/mod.rs`); an item defined at the top level
#     of a file (struct, enum, union, fn, type, trait, const, static, macro_rules) ends the walk
#     at that file; a name the module imports (`pub use` re-exports and private `use` alike) is
#     followed THROUGH the import to the file that defines it: `use super::Effects` in
#     proto/sessions.rs is an edge to proto/effects.rs, not to the mod.rs that imports it (that
#     mod.rs has its own edge to effects.rs, from its `use`). A name that ends outside the crate
#     (`use std::..` re-exported) is no edge;
#   - `mod x;` is an edge from the declaring file to x's file: a parent depends on its children
#     (it also calls the methods they add to its types, which no path shows). So a file that uses
#     an item DEFINED in its parent's file (`use super::Proxy` with `struct Proxy` in mod.rs)
#     closes a cycle, while one that uses what its parent re-exports from a sibling does not;
#   - `use x::*` is an edge to x's root file (its mod.rs, or x.rs) only, not to the files x
#     re-exports from; a name used through the glob in a path (`Name::new`) is then resolved
#     through it like any import, a bare `Name` is not seen;
#   - a path that enters a module of the crate and names nothing found there (made by a macro,
#     say) counts as an edge to that module's file, and is listed as "unresolved".
# Tests are left out (they may reach anywhere): the files `tests.rs` and `*_tests.rs`, and every
# item under `#[cfg(test)]` (the `mod tests { .. }` at the end of a file, a `#[cfg(test)] fn` in
# an impl). So are comments, doc comments included (`///`, `//!`: an intra-doc link such as
# [`super::Config::held_limit`] is no import), string and char literals, and src/main.rs (the
# binary, another crate).
#
# It prints the graph between top-level modules (`catalog`, `proto`, ..: the files' edges lumped
# by first path component, lib.rs left out) and checks it has no cycle (tsort); then the graph
# between files, one line per file, and checks it has no cycle (tsort). On a cycle it prints, for
# each set of nodes that reach each other, its nodes, the edges between them and the names behind
# each edge, and exits 1.
#
# What it cannot see: paths built inside macros, and items a macro defines (a `foo!()` call is no
# edge); methods and associated items (a method defined in an `impl Proxy` block of restart.rs
# counts as being where `Proxy` is); inline `mod x { .. }` blocks other than tests (their items
# count as the file's); `#[path]` attributes. It reads rustfmt's layout: top-level items start
# in column 0, a `#[cfg(test)]` item ends at the `}` in its own column.
set -eu
export LC_ALL=C
src=${1:-"$(dirname "$0")/../src"}
cd "$src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

files=$(find . -name '*.rs' | sed 's|^\./||' | grep -vE '^main\.rs$|(^|/)tests\.rs$|_tests\.rs$' | sort)
# shellcheck disable=SC2086 # one argument per file
awk -v out="$tmp" '
# One line with the literals and comments blanked out (state carried across lines).
function strip(s,    o, t, k) {
  o = ""
  if (inblock) { k = index(s, "*/"); if (!k) return ""; s = substr(s, k + 2); inblock = 0 }
  if (closing == "\"") { if (!match(s, /^(\\.|[^"\\])*"/)) return ""; s = substr(s, RLENGTH + 1); closing = "" }
  if (closing != "") { k = index(s, closing); if (!k) return ""; s = substr(s, k + length(closing)); closing = "" }
  while (match(s, /\/\/|\/\*|r#*"|"|'\''(\\.[^'\'']*|[^'\''\\])'\''/)) {
    o = o substr(s, 1, RSTART - 1); t = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
    if (t == "//") { s = ""; break }
    if (t == "/*") {
      k = index(s, "*/"); if (!k) { inblock = 1; s = ""; break }
      s = substr(s, k + 2); o = o " "; continue
    }
    if (t ~ /^'\''/) { o = o "'\'''\''"; continue }
    if (t == "\"") {
      # an ordinary string: ends at the first unescaped quote
      if (match(s, /^(\\.|[^"\\])*"/)) { s = substr(s, RLENGTH + 1); o = o "\"\""; continue }
      closing = "\""; s = ""; break
    }
    t = substr(t, 2, length(t) - 2)   # raw string r#".."#: the hashes
    k = index(s, "\"" t); if (!k) { closing = "\"" t; s = ""; break }
    s = substr(s, k + 1 + length(t)); o = o "\"\""
  }
  return o s
}
function modof(node,    m) {
  if (node == "lib") return "crate"
  m = node; sub(/\/mod$/, "", m); gsub(/\//, "::", m); return "crate::" m
}
function parent(m) { if (m == "crate") return m; sub(/::[^:]*$/, "", m); return m }
# Splits s at the commas outside braces.
function split_top(s, parts,    n, d, i, c, cur) {
  n = 0; d = 0; cur = ""
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c == "{") d++
    if (c == "}") d--
    if (c == "," && d == 0) { if (cur != "") parts[++n] = cur; cur = ""; continue }
    cur = cur c
  }
  if (cur != "") parts[++n] = cur
  return n
}
# The leaves of a use tree: each binds a name to a path (relative to the module of the use).
function expand(prefix, s,    parts, n, i, p, k, head, alias, path) {
  if (s ~ /^\{.*\}$/) s = substr(s, 2, length(s) - 2)
  n = split_top(s, parts)
  for (i = 1; i <= n; i++) {
    p = parts[i]
    if ((k = index(p, "{")) > 0) {
      head = substr(p, 1, k - 1)
      expand(prefix head, substr(p, k))
      continue
    }
    alias = ""
    if ((k = index(p, " as ")) > 0) { alias = substr(p, k + 4); p = substr(p, 1, k - 1) }
    path = prefix p
    if (path ~ /::\*$/ || path == "*") {
      sub(/::\*$/, "", path); if (path == "*") path = "self"
      nglob[mod]++; glob[mod, nglob[mod]] = path
      addref(path, "use " path "::*")
      continue
    }
    if (path ~ /::self$/) sub(/::self$/, "", path)
    if (alias == "") { alias = path; sub(/.*::/, "", alias) }
    if (alias != "_") bind[mod, alias] = path
    addref(path, "use " path)
  }
}
function addref(path, why) {
  if ((node, path) in seen) return
  seen[node, path] = 1
  nref++; rnode[nref] = node; rpath[nref] = path; rwhy[nref] = why
}
function use_stmt(s) {
  sub(/;.*/, "", s)
  sub(/^[ \t]*(pub(\([^)]*\))?[ \t]+)?use[ \t]+/, "", s)
  gsub(/[ \t]+as[ \t]+/, "@as@", s); gsub(/[ \t]/, "", s); gsub(/@as@/, " as ", s)
  expand("", s)
}
# Looks name s up in module m: "M:<module>", "F:<file>" (an item of that file), "E" (outside the
# crate), or "" (not found).
function lookup(m, s, depth,    r, i, key) {
  if ((m "::" s) in fileof) return "M:" m "::" s
  if ((m, s) in def) return "F:" fileof[m]
  key = m SUBSEP s
  if (key in bind && !(key in busy)) {
    busy[key] = 1; r = walk(m, bind[key], depth + 1); delete busy[key]
    return r == "" ? "E" : r
  }
  for (i = 1; i <= nglob[m]; i++) {
    if ((m, "*" i) in busy) continue
    busy[m, "*" i] = 1; r = walk(m, glob[m, i] "::" s, depth + 1); delete busy[m, "*" i]
    if (r ~ /^[MFE]/) return r
  }
  return ""
}
# Walks a path from module ctx: "M:<module>", "F:<file>", "U:<file>" (unresolved: stopped in that
# file'\''s module), or "E"/"" (outside the crate).
function walk(ctx, path, depth,    seg, n, i, cur, r) {
  if (depth > 30) return ""
  n = split(path, seg, "::")
  cur = ctx; i = 1
  if (seg[1] == "crate") { cur = "crate"; i = 2 }
  for (; i <= n; i++) {
    if (seg[i] == "super") { cur = parent(cur); continue }
    if (seg[i] == "self") continue
    r = lookup(cur, seg[i], depth)
    if (r ~ /^M:/) { cur = substr(r, 3); continue }
    if (r != "") return r
    if (i == 1) return "E"   # another crate, the prelude, a generic parameter
    return "U:" fileof[cur]
  }
  return "M:" cur
}
FNR == 1 {
  node = FILENAME; sub(/\.rs$/, "", node)
  mod = modof(node); fileof[mod] = node; nodes[++nnode] = node
  inblock = 0; closing = ""; cfgtest = 0; skipping = 0; ustmt = ""
}
{
  line = strip($0)
  # A visibility path (`pub(in crate::proto)`) names a scope, not an item: no edge.
  gsub(/pub[ \t]*\([ \t]*in[ \t]+[^)]*\)/, "pub(crate)", line)
  if (skipping) { if (line ~ ("^" skip "}")) skipping = 0; next }
  if (line ~ /^[ \t]*#\[cfg\(test\)\]/) { cfgtest = 1; next }
  if (cfgtest) {
    if (line ~ /^[ \t]*(#\[|$)/) next
    cfgtest = 0
    if (line ~ /;[ \t]*$/ && line !~ /\{/) next
    match(line, /^[ \t]*/); skip = substr(line, 1, RLENGTH); skipping = 1; next
  }
  if (ustmt != "" || line ~ /^[ \t]*(pub(\([^)]*\))?[ \t]+)?use[ \t]/) {
    ustmt = ustmt " " line
    if (ustmt ~ /;/) { use_stmt(ustmt); ustmt = "" }
    next
  }
  if (match(line, /^(pub(\([^)]*\))?[ \t]+)?mod[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*;/)) {
    s = substr(line, 1, RLENGTH); sub(/^.*mod[ \t]+/, "", s); sub(/[ \t]*;$/, "", s)
    addref("self::" s, "mod " s)
    next
  }
  if (match(line, /^(pub(\([^)]*\))?[ \t]+)?((const|async|unsafe|default|extern[ \t]+"")[ \t]+)*(struct|enum|union|fn|type|trait|const|static([ \t]+mut)?|macro_rules!)[ \t]+[A-Za-z_][A-Za-z0-9_]*/)) {
    s = substr(line, 1, RLENGTH); sub(/.*[ \t!]/, "", s); def[mod, s] = 1
  }
  # Paths written in code.
  s = line
  while (match(s, /[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+/)) {
    p = substr(s, RSTART, RLENGTH)
    if (RSTART < 3 || substr(s, RSTART - 2, 2) != "::") addref(p, p)
    s = substr(s, RSTART + RLENGTH)
  }
}
END {
  for (i = 1; i <= nref; i++) {
    r = walk(modof(rnode[i]), rpath[i], 0)
    if (r !~ /^[MFU]:/) continue
    to = substr(r, 3); if (r ~ /^M:/) to = fileof[to]
    if (to == rnode[i] || to == "") continue
    if (r ~ /^U:/) print rnode[i] ": " rwhy[i] " (counted as " to ")" > (out "/unresolved")
    k = rnode[i] SUBSEP to
    # the names behind the edge, for the report of a cycle: the first few, `Type::member` left out
    if (!(k in why)) why[k] = rwhy[i]
    else if (rwhy[i] !~ /^[A-Z]/ && nwhy[k]++ < 4) why[k] = why[k] ", " rwhy[i]
    else if (nwhy[k] == 5) why[k] = why[k] ", ..."
  }
  for (k in why) { split(k, e, SUBSEP); print e[1], e[2], why[k] > (out "/edges") }
  for (i = 1; i <= nnode; i++) print nodes[i], nodes[i] > (out "/edges")
}' $files </dev/null

# node -> deps, from "from to [why]" lines (a "n n" line makes n a node).
graph() {
  sort -k1,1 -k2,2 | awk '{ n[$1] } $1 != $2 && !(($1, $2) in seen) { seen[$1, $2]; d[$1] = d[$1] " " $2 }
                          END { for (x in n) print x " ->" d[x] }' | sort
}
# The sets of nodes that reach each other (Tarjan's strongly connected components), each with
# the edges between its nodes and the names behind them.
cycles() { awk '
  function visit(v,    i, w) {
    idx[v] = low[v] = ++t; stack[++sp] = v; on[v] = 1
    for (i = 1; i <= nout[v]; i++) {
      w = out[v, i]
      if (!(w in idx)) { visit(w); if (low[w] < low[v]) low[v] = low[w] }
      else if (on[w] && idx[w] < low[v]) low[v] = idx[w]
    }
    if (low[v] == idx[v]) {
      nscc++; do { w = stack[sp--]; on[w] = 0; scc[w] = nscc; size[nscc]++ } while (w != v)
    }
  }
  { n[$1]; n[$2]; if ($1 != $2) { out[$1, ++nout[$1]] = $2; e[++ne] = $0 } }
  END {
    for (v in n) if (!(v in idx)) visit(v)
    for (v in n) if (size[scc[v]] > 1) print scc[v], 0, v
    for (i = 1; i <= ne; i++) {
      split(e[i], f, " "); c = scc[f[1]]
      if (c == scc[f[2]]) { w = e[i]; sub(/^[^ ]+ [^ ]+ /, "", w); print c, 1, f[1] " -> " f[2] "   (" w ")" }
    }
  }' | sort -k1,1n -k2,2n -k3 | awk '
  $1 != c { c = $1; line = "cycle:"; n = 0 }
  $2 == 0 { line = line " " $3; n++; next }
  $2 == 1 && !done[c]++ { print line " (" n " reach each other)" }
  $2 == 1 { $1 = $2 = ""; sub(/^  /, ""); print "  " $0 }'; }
# Exits 1 (after printing the cycles) when the "from to [why]" lines on stdin have a cycle.
check() {
  cat >"$tmp/check"
  if cut -d' ' -f1,2 "$tmp/check" | tsort >/dev/null 2>&1; then return 0; fi
  cycles <"$tmp/check" >&2
  return 1
}

status=0
echo "== top-level modules =="
awk '{ a = $1; b = $2; sub(/\/.*/, "", a); sub(/\/.*/, "", b)
       if (a != "lib" && b != "lib") print a, b, $1 " -> " $2 }' "$tmp/edges" | sort -u >"$tmp/top"
graph <"$tmp/top"
if awk '$1 != $2' "$tmp/top" | sort -u -k1,2 | check; then echo "no cycle"; else status=1; fi

echo "== files =="
graph <"$tmp/edges"
if [ -s "$tmp/unresolved" ]; then
  echo "unresolved (each counted as an edge to the file named):"
  sort "$tmp/unresolved" | sed 's/^/  /'
fi
if check <"$tmp/edges"; then echo "no cycle between files"; else status=1; fi
[ $status -eq 0 ] || echo "module-deps: cycle (see above)" >&2
exit $status
