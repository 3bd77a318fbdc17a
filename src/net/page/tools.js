// acp-journal serve's page, its tool calls' cards: loaded before page.js, which calls
// window.acpJournalTools with the helpers they share (`el`, `str`, and diff.js's `diff`) and
// gets back the function that draws a card again from what is known of its call: kind, title,
// status, locations, the permission given, and its content (diffs, text, terminals, JSON), as
// the HTML export's cards. Its text is an agent's, untrusted: textContent only.
(function () {
  "use strict";

  window.acpJournalTools = function (ui) {
    var el = ui.el, str = ui.str, diff = ui.diff;

    /** "permission: allow (Allow this change) by acp-journal page" for `_meta.acpJournal.permission`. */
    function permissionText(p, options) {
      var optionId = str(p.optionId);
      var name = "";
      (options || []).forEach(function (o) { if (o && o.optionId === optionId) { name = str(o.name); } });
      var what = optionId || str(p.outcome) || "?";
      var text = "permission: " + what + (name ? " (" + name + ")" : "");
      if (str(p.outcome) && p.outcome !== "selected") { text += " [" + p.outcome + "]"; }
      // The host's `by` names the connection (`c3`), `client` the name it gave in `initialize`.
      var by = str(p.client) || (typeof p.by === "string" ? p.by : "");
      if (by) { text += " by " + by; }
      return text;
    }

    function json(parent, label, value) {
      parent.appendChild(el("h4", null, label));
      var text;
      try { text = JSON.stringify(value, null, 2); } catch (e) { text = String(value); }
      parent.appendChild(el("pre", "json", text === undefined ? "null" : text));
    }

    /** `card`'s summary and body from its call (`options`: its permission request's). */
    function render(card, options) {
      var call = card.call;
      var summary = card.summary;
      summary.replaceChildren();
      if (str(call.kind)) {
        summary.appendChild(el("span", "kind", call.kind));
        summary.appendChild(document.createTextNode(" "));
      }
      summary.appendChild(el("span", "title", str(call.title) || call.toolCallId));
      if (str(call.status)) {
        summary.appendChild(document.createTextNode(" "));
        summary.appendChild(el("span", "status s-" + call.status, call.status));
      }
      (Array.isArray(call.locations) ? call.locations : []).forEach(function (l) {
        if (!l || !str(l.path)) { return; }
        var where = typeof l.line === "number" ? l.path + ":" + l.line : l.path;
        summary.appendChild(document.createTextNode(" "));
        summary.appendChild(el("span", "loc", where));
      });
      if (call.permission) {
        summary.appendChild(document.createTextNode(" "));
        summary.appendChild(el("span", "perm", permissionText(call.permission, options)));
      }
      var body = card.body;
      body.replaceChildren();
      var empty = true;
      (Array.isArray(call.content) ? call.content : []).forEach(function (item) {
        empty = false;
        var type = item && item.type;
        if (type === "diff") {
          body.appendChild(diff(item));
        } else if (type === "content" && item.content && typeof item.content.text === "string") {
          body.appendChild(el("pre", "text", item.content.text));
        } else if (type === "content") {
          json(body, "content", item.content);
        } else if (type === "terminal") {
          var p = el("p", null, "terminal ");
          p.appendChild(el("code", null, str(item.terminalId) || "?"));
          body.appendChild(p);
        } else {
          json(body, "content", item);
        }
      });
      ["rawInput", "rawOutput"].forEach(function (f) {
        if (Object.prototype.hasOwnProperty.call(call, f)) {
          empty = false;
          json(body, f, call[f]);
        }
      });
      if (empty) { body.appendChild(el("p", "empty", "no details in this message")); }
    }

    return render;
  };
})();
