// acp-journal serve's page, its diffs: loaded before page.js, which calls window.acpJournalDiff
// with the helpers the two share (`el`, `str`) and gets back the function that draws a `diff`
// content block as a unified diff (context 3), with the HTML export's markup. Its text is an
// agent's, untrusted: textContent only.
(function () {
  "use strict";

  // A diff whose changed middle is larger than this many line pairs is shown as all removed,
  // then all added (the comparison would take too long).
  var DIFF_CELLS = 4000000;

  window.acpJournalDiff = function (ui) {
    var el = ui.el, str = ui.str;

    /** Lines of `text`, each with its line break (the last may have none). */
    function splitLines(text) {
      var out = [];
      var start = 0;
      for (var i = 0; i < text.length; i++) {
        if (text.charCodeAt(i) === 10) { out.push(text.slice(start, i + 1)); start = i + 1; }
      }
      if (start < text.length) { out.push(text.slice(start)); }
      return out;
    }

    /** The edit script from `a` to `b` (lines): [{tag: " "|"-"|"+", line}]. */
    function diffLines(a, b) {
      var pre = 0;
      while (pre < a.length && pre < b.length && a[pre] === b[pre]) { pre++; }
      var post = 0;
      while (post < a.length - pre && post < b.length - pre &&
        a[a.length - 1 - post] === b[b.length - 1 - post]) { post++; }
      var x = a.slice(pre, a.length - post);
      var y = b.slice(pre, b.length - post);
      var ops = [];
      var i;
      for (i = 0; i < pre; i++) { ops.push({ tag: " ", line: a[i] }); }
      if (x.length * y.length > DIFF_CELLS) {
        x.forEach(function (l) { ops.push({ tag: "-", line: l }); });
        y.forEach(function (l) { ops.push({ tag: "+", line: l }); });
      } else {
        // Longest common subsequence, from the end.
        var n = x.length;
        var m = y.length;
        var w = m + 1;
        var lcs = new Uint32Array((n + 1) * w);
        for (var p = n - 1; p >= 0; p--) {
          for (var q = m - 1; q >= 0; q--) {
            lcs[p * w + q] = x[p] === y[q] ? lcs[(p + 1) * w + q + 1] + 1
              : Math.max(lcs[(p + 1) * w + q], lcs[p * w + q + 1]);
          }
        }
        var r = 0;
        var s = 0;
        // Deletions before insertions, as unified diffs show them.
        while (r < n || s < m) {
          if (r < n && s < m && x[r] === y[s]) {
            ops.push({ tag: " ", line: x[r] }); r++; s++;
          } else if (r < n && (s === m || lcs[(r + 1) * w + s] >= lcs[r * w + s + 1])) {
            ops.push({ tag: "-", line: x[r] }); r++;
          } else {
            ops.push({ tag: "+", line: y[s] }); s++;
          }
        }
      }
      for (i = a.length - post; i < a.length; i++) { ops.push({ tag: " ", line: a[i] }); }
      return ops;
    }

    /** `@@ -a,b +c,d @@` ranges as the export writes them. */
    function range(start, len) {
      if (len === 1) { return String(start + 1); }
      return (len === 0 ? start : start + 1) + "," + len;
    }

    /** A `diff` content block as a unified diff (context 3), the export's markup. */
    function diff(item) {
      var path = str(item.path) || "?";
      var box = el("div", "diff");
      var head = el("div", "diff-path", typeof item.oldText === "string" ? "diff " : "new file ");
      head.appendChild(el("code", null, path));
      box.appendChild(head);
      var pre = el("pre");
      pre.appendChild(el("span", "d-file", "--- " + path + "\n+++ " + path + "\n"));
      var ops = diffLines(splitLines(str(item.oldText)), splitLines(str(item.newText)));
      // Where each op stands in the old and new texts.
      var oldAt = 0;
      var newAt = 0;
      ops.forEach(function (op) {
        op.old = oldAt;
        op.new = newAt;
        if (op.tag !== "+") { oldAt++; }
        if (op.tag !== "-") { newAt++; }
      });
      var changed = [];
      ops.forEach(function (op, k) { if (op.tag !== " ") { changed.push(k); } });
      var context = 3;
      var h = 0;
      while (h < changed.length) {
        var first = changed[h];
        var last = first;
        while (h + 1 < changed.length && changed[h + 1] - last <= 2 * context + 1) { h++; last = changed[h]; }
        h++;
        var from = Math.max(0, first - context);
        var to = Math.min(ops.length, last + context + 1);
        var oldLen = 0;
        var newLen = 0;
        for (var k = from; k < to; k++) {
          if (ops[k].tag !== "+") { oldLen++; }
          if (ops[k].tag !== "-") { newLen++; }
        }
        pre.appendChild(el("span", "d-hunk", "@@ -" + range(ops[from].old, oldLen) + " +" +
          range(ops[from].new, newLen) + " @@\n"));
        for (k = from; k < to; k++) {
          var op = ops[k];
          var line = op.line.charAt(op.line.length - 1) === "\n" ? op.line.slice(0, -1) : op.line;
          var cls = op.tag === "-" ? "d-del" : (op.tag === "+" ? "d-ins" : "d-ctx");
          pre.appendChild(el("span", cls, op.tag + line + "\n"));
          if (line === op.line) {
            pre.appendChild(el("span", "d-hunk", "\\ No newline at end of file\n"));
          }
        }
      }
      box.appendChild(pre);
      return box;
    }

    return diff;
  };
})();
