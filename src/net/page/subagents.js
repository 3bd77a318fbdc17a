// acp-journal serve's page, its subagents: loaded before page.js, which declares
// `clientCapabilities.subagents` and calls window.acpJournalSubagents with the helpers the two
// share (`el`, `str`) and its transcript (`view`). A child session (announced on its parent by
// a `subagent_update`, before any line of its own) is drawn as a timeline of its own inside
// its parent's, where it was announced, as the HTML export draws it: its title, then its own
// messages, tool calls and permission requests, indented; its state and end in its parent's,
// where they came. A `session_message` between two sessions is drawn once, in the view of the
// session it arrived in. Its text is an agent's, untrusted: textContent only.
(function () {
  "use strict";

  // The most children one session shows, and how deep they nest (as the export's model).
  var CHILD_LIMIT = 256;
  var DEPTH_LIMIT = 8;

  // What of the transcript's state is one timeline's own: a child's is swapped in while one
  // of its lines is drawn (the transcript then draws into the child's box, not its turn).
  var OWN = ["root", "turn", "turns", "para", "tools", "options", "plan", "compactions", "tasks",
    "echo", "userMessage", "turnOpen"];

  // A child's updates that are its own state, not its parent's session's: not drawn (its
  // title names its box instead).
  var STATE = ["current_mode_update", "config_option_update", "usage_update",
    "available_commands_update"];

  window.acpJournalSubagents = function (ui) {
    var el = ui.el, str = ui.str, view = ui.view;
    var children = {};   // child sessionId -> {id, title, depth, box, heading, since, own}
    var count = 0;
    var here = null;     // the child whose line is being drawn (null: the session's own)

    function reset() {
      children = {};
      count = 0;
      here = null;
    }

    function knows(sessionId) {
      return typeof sessionId === "string" && Object.prototype.hasOwnProperty.call(children, sessionId);
    }

    /** Run `draw` in the timeline of `sessionId`: a child's box, else the session's own. */
    function within(sessionId, draw) {
      var child = knows(sessionId) ? children[sessionId] : null;
      if (!child || here) { draw(); return; }
      var saved = {};
      OWN.forEach(function (f) { saved[f] = view[f]; view[f] = child.own[f]; });
      here = child;
      try {
        draw();
      } finally {
        OWN.forEach(function (f) { child.own[f] = view[f]; view[f] = saved[f]; });
        here = null;
      }
    }

    /** An update of `sessionId` (the session shown, or one of its children). */
    function draw(sessionId, u) {
      if (!knows(sessionId)) { view.update(u); return; }
      within(sessionId, function () {
        var kind = str(u.sessionUpdate);
        if (kind === "session_info_update") {
          if (str(u.title)) { retitle(here, u.title); }
          return;
        }
        if (STATE.indexOf(kind) < 0) { view.update(u); }
      });
    }

    /** The one-word state of an RFD `state` ({state, stopReason}); "" when none. */
    function word(state) {
      var s = str(state && state.state);
      if (s === "requires_action") { return "waiting for the user"; }
      if (s === "idle") { return str(state.stopReason) || "idle"; }
      return s;
    }

    function retitle(child, title) {
      child.title = title;
      child.heading.textContent = title + (child.state ? " · " + child.state : "");
    }

    /** A `subagent_update`: a child announced (a line, then its box), or its state changed. */
    function announced(u) {
      var id = str(u.sessionId);
      if (!id || id === view.session.sessionId || (here && id === here.id)) { return; }
      var child = children[id];
      var first = !child;
      if (first) {
        if (count >= CHILD_LIMIT) { return; }
        child = children[id] = {
          id: id,
          title: str(u.title) || str(u.description) || id,
          depth: Math.min(here ? here.depth + 1 : 1, DEPTH_LIMIT),
          state: "",
          // How long it worked, when both its start and its end are seen live.
          since: view.history ? null : Date.now()
        };
        count += 1;
      }
      var state = word(u.state);
      if (!first && !state && !str(u.title)) { return; }
      if (state) { child.state = state; }
      var about = first && str(u.title) && str(u.description) ? " (" + u.description + ")" : "";
      var ended = str(u.state && u.state.state) === "idle";
      var line = (ended ? "⇠" : "⇢") + " subagent " + (str(u.title) || child.title) + about +
        (state ? ": " + state : (ended ? ": ended" : ""));
      if (ended && child.since !== null && !view.history) {
        line += " (" + ((Date.now() - child.since) / 1000).toFixed(1) + " s)";
      }
      var note = view.add(el("div", "subagent", line));
      note.setAttribute("data-session", id);
      if (first) { open(child); }
      retitle(child, str(u.title) || child.title);
      if (child.box) { child.box.setAttribute("data-state", child.state); }
    }

    /** The child's box, after its announcement: a timeline of its own, collapsible. */
    function open(child) {
      var box = el("details", "child");
      box.open = true;
      box.setAttribute("data-session", child.id);
      box.setAttribute("data-depth", String(child.depth));
      child.heading = el("summary", "child-title");
      box.appendChild(child.heading);
      child.box = view.add(box);
      child.own = {
        root: box, turn: null, turns: 0, para: null, tools: {}, options: {}, plan: null,
        compactions: {}, tasks: {}, echo: "", userMessage: "", turnOpen: false
      };
    }

    /** The ID of the session whose line is being drawn. */
    function current() { return here ? here.id : view.session.sessionId; }

    function name(sessionId) {
      return knows(sessionId) ? children[sessionId].title : "the session";
    }

    /** "✉ from → to: " for a message between sessions; null for the sender's own copy of one
     *  (the agent sends it in the recipient's view too: drawn there). */
    function label(u) {
      var at = current();
      var to = str(u.recipientSessionId) || at;
      if (to !== at && Object.prototype.hasOwnProperty.call(u, "recipientMessageId")) { return null; }
      return "✉ " + name(str(u.senderSessionId) || at) + " → " + name(to) + ": ";
    }

    function text(content) {
      return (Array.isArray(content) ? content : [content]).map(function (b) {
        return b && typeof b.text === "string" ? b.text : "";
      }).join("");
    }

    /** A message between sessions, whole, or a chunk of one (its paragraph goes on). */
    function message(u, chunk) {
      var head = label(u);
      if (head === null) { return; }
      if (!chunk) {
        view.add(el("div", "message", head + text(u.content)));
        return;
      }
      var voice = "message " + str(u.messageId);
      var more = view.para && view.para.voice === voice;
      view.chunk(voice, (more ? "" : head) + text(u.content));
    }

    function update(kind, u) {
      if (kind === "subagent_update") {
        announced(u);
      } else {
        message(u, kind === "session_message_chunk");
      }
    }

    return { reset: reset, knows: knows, within: within, draw: draw, update: update };
  };
})();
