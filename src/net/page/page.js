// acp-journal serve's page: an ACP client of its own over a WebSocket to /acp, which shows the
// token as a subprotocol (a browser cannot set Authorization on a WebSocket). The token comes
// from the address's fragment (#token=…, taken out of the address bar at once) or the sign-in
// form, and stays in this tab's sessionStorage. It lists the sessions, follows one live with the
// HTML export's cards, answers its permission requests, sends prompts and cancels turns.
//
// Everything an agent or the host sends is untrusted: the DOM is built with createElement and
// textContent only (no innerHTML anywhere), as strictly escaped as the export.
//
// With `serve --store`, a team view too: team.js (window.acpJournalTeam), given the helpers it
// shares with this script. The tool calls' cards are drawn by tools.js (window.acpJournalTools),
// their diffs by diff.js (window.acpJournalDiff), the subagents' timelines by subagents.js
// (window.acpJournalSubagents).
(function () {
  "use strict";

  var VERSION = document.body.getAttribute("data-version") || "";
  var LIST_EVERY_MS = 10000;
  var BACKOFF_FIRST_MS = 500;
  var BACKOFF_MAX_MS = 10000;

  var $ = function (id) { return document.getElementById(id); };

  /** An element with a class and text (both optional). */
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  /** A paragraph's text node past this many characters continues in a block of its own. */
  var SEGMENT = 4096;

  function str(v) { return typeof v === "string" ? v : ""; }

  /** A tool call's card drawn again from what is known of it (tools.js; its `diff` content
   *  blocks as unified diffs, the export's markup: diff.js). */
  var renderTool = window.acpJournalTools({
    el: el, str: str, diff: window.acpJournalDiff({ el: el, str: str })
  });

  // ------------------------------------------------------------------ the token

  var TOKEN_KEY = "acp-journal.token";
  var SUBPROTOCOL = "acp-journal";
  var BEARER_PROTOCOL = "acp-journal.bearer.";

  /** The token: from the address's fragment (then out of the address bar), else this tab's. */
  function takeToken() {
    if (location.hash.indexOf("#token=") === 0) {
      var given = "";
      try { given = decodeURIComponent(location.hash.slice("#token=".length)); } catch (e) { given = ""; }
      history.replaceState(null, "", location.pathname);
      if (given.trim()) { sessionStorage.setItem(TOKEN_KEY, given.trim()); }
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  /** The subprotocols that show `token` (base64url, as a subprotocol must be a plain word);
   *  null for one that is not ASCII (no token is). */
  function protocols(token) {
    if (!/^[\x21-\x7e]+$/.test(token)) { return null; }
    var encoded = btoa(token).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    return [SUBPROTOCOL, BEARER_PROTOCOL + encoded];
  }

  /** The sign-in form instead of the page (`wrong`: the last token was refused). */
  function signIn(wrong) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("bar").hidden = true;
    $("layout").hidden = true;
    $("team").hidden = true;
    // Signed in again, the page starts on this host's sessions.
    $("team-tab").setAttribute("aria-pressed", "false");
    $("live-tab").setAttribute("aria-pressed", "true");
    $("sign-in").hidden = false;
    $("sign-in-error").hidden = !wrong;
    $("token").value = "";
    $("token").focus();
  }

  $("sign-in-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var given = $("token").value.trim();
    if (!given) { return; }
    sessionStorage.setItem(TOKEN_KEY, given);
    $("token").value = "";
    $("sign-in").hidden = true;
    $("bar").hidden = false;
    $("layout").hidden = false;
    conn.backoff = BACKOFF_FIRST_MS;
    connect();
  });

  // ------------------------------------------------------------------ the connection

  var conn = {
    ws: null,
    nextId: 1,
    pending: {},        // request id -> {resolve, reject}
    attach: false,      // the host advertised session/attach
    ready: false,       // this socket is initialized
    opened: null,       // the session attached or loaded on this socket
    everOpen: false,    // this socket got through its handshake
    backoff: BACKOFF_FIRST_MS,
    retry: null,
    now: false          // the next reconnection is ours (to open another session): at once
  };

  function setConnection(text, cls) {
    var s = $("connection");
    s.textContent = text;
    s.className = "connection " + (cls || "");
  }

  function connect() {
    conn.retry = null;
    var token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) { signIn(false); return; }
    var offered = protocols(token);
    if (!offered) { signIn(true); return; }
    var ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/acp", offered);
    conn.ws = ws;
    conn.everOpen = false;
    setConnection("connecting…");
    ws.onopen = function () {
      if (conn.ws !== ws) { return; }
      conn.everOpen = true;
      start();
    };
    ws.onmessage = function (e) {
      if (conn.ws !== ws) { return; }
      var msg;
      try { msg = JSON.parse(e.data); } catch (err) { return; }
      if (msg && typeof msg === "object" && !Array.isArray(msg)) { receive(msg); }
    };
    ws.onclose = function () {
      if (conn.ws !== ws) { return; }
      dropped();
    };
  }

  /** The socket is gone: fail what waits on it, then connect again, backing off. */
  function dropped() {
    var failed = conn.pending;
    conn.pending = {};
    conn.ready = false;
    conn.opened = null;
    conn.ws = null;
    Object.keys(failed).forEach(function (id) {
      failed[id].reject({ code: 0, message: "the connection to the host was lost" });
    });
    view.connectionLost();
    var delay = conn.now ? 0 : conn.backoff;
    if (!conn.now) { conn.backoff = Math.min(conn.backoff * 2, BACKOFF_MAX_MS); }
    conn.now = false;
    setConnection(delay ? "disconnected: trying again in " + Math.round(delay / 1000) + " s" : "reconnecting…", "down");
    if (!conn.everOpen) {
      // Refused before the handshake: a wrong token (a browser is not told why), or no server.
      // A request that may carry the header says which: 401 is the token.
      var token = sessionStorage.getItem(TOKEN_KEY) || "";
      fetch("/acp", { headers: { Authorization: "Bearer " + token }, cache: "no-store", credentials: "omit" })
        .then(function (r) {
          if (r.status === 401) { signIn(true); } else { conn.retry = setTimeout(connect, delay); }
        }, function () { conn.retry = setTimeout(connect, delay); });
      return;
    }
    conn.retry = setTimeout(connect, delay);
  }

  /** Close this socket and open another at once (a session is opened on a fresh connection). */
  function reconnectNow() {
    if (conn.ws) {
      conn.now = true;
      conn.ws.close();
    } else if (conn.retry) {
      clearTimeout(conn.retry);
      connect();
    }
  }

  function send(msg) {
    if (!conn.ws || conn.ws.readyState !== WebSocket.OPEN) { return false; }
    msg.jsonrpc = "2.0";
    conn.ws.send(JSON.stringify(msg));
    return true;
  }

  /** A request; resolves with its result, rejects with its error ({code, message}). */
  function request(method, params) {
    return new Promise(function (resolve, reject) {
      var id = conn.nextId++;
      if (!send({ id: id, method: method, params: params })) {
        reject({ code: 0, message: "not connected to the host" });
        return;
      }
      conn.pending[id] = { resolve: resolve, reject: reject };
    });
  }

  function notify(method, params) { send({ method: method, params: params }); }

  function answer(id, result) { send({ id: id, result: result }); }

  function refuse(id, code, message) { send({ id: id, error: { code: code, message: message } }); }

  function receive(msg) {
    var hasId = Object.prototype.hasOwnProperty.call(msg, "id") && msg.id !== null;
    if (typeof msg.method === "string") {
      if (hasId) { hostRequest(msg); } else { hostNotification(msg.method, msg.params || {}); }
      return;
    }
    if (!hasId) { return; }
    var waiting = conn.pending[msg.id];
    if (!waiting) { return; }
    delete conn.pending[msg.id];
    if (msg.error) {
      waiting.reject({ code: msg.error.code, message: str(msg.error.message) || "error" });
    } else {
      waiting.resolve(msg.result || {});
    }
  }

  function hostRequest(msg) {
    var params = msg.params || {};
    if (msg.method === "session/request_permission" && (params.sessionId === conn.opened ||
        subagents.knows(params.sessionId))) {
      // For the session shown (or a subagent of it); else the user just picked another one and
      // this socket is closing: left unanswered, the host asks again elsewhere.
      if (ours(params.sessionId)) {
        view.follow(function () {
          subagents.within(params.sessionId, function () { view.permissionAsked(msg.id, params); });
        });
      }
      return;
    }
    // No file system, no terminals (not declared).
    refuse(msg.id, -32601, "Method not found: " + msg.method);
  }

  function hostNotification(method, params) {
    if (method === "session/update") {
      if (ours(params.sessionId) && params.update) {
        view.follow(function () { subagents.draw(params.sessionId, params.update); });
      }
    } else if (method === "session/list_changed") {
      list.soon();
    } else if (method === "$/cancel_request") {
      var id = params.requestId !== undefined ? params.requestId : params.id;
      if (view.settle(id)) {
        refuse(id, -32800, "Request cancelled");
      }
    }
  }

  /** `sessionId` is the session shown on this socket, or one of its subagents. */
  function ours(sessionId) {
    return view.shows(sessionId) || (!!view.session && view.shows(view.session.sessionId) &&
      subagents.knows(sessionId));
  }

  /** A fresh socket: initialize, list, and bring back the session that was open. */
  function start() {
    setConnection("initializing…");
    request("initialize", {
      protocolVersion: 1,
      // What the timeline draws beyond the baseline: compactions (replayed to it then),
      // notices, subagents (their own timelines), background tasks (claude-agent-acp's,
      // declared as JetBrains AIR does).
      clientCapabilities: {
        fs: { readTextFile: false, writeTextFile: false }, terminal: false,
        session: { compaction: {}, notices: {} }, subagents: {},
        _meta: { jetbrains: { air: { version: 1, capabilities: ["asyncTasks"] } } }
      },
      clientInfo: { name: "acp-journal page", version: VERSION }
    }).then(function (init) {
      conn.backoff = BACKOFF_FIRST_MS;
      conn.ready = true;
      var caps = init.agentCapabilities || {};
      conn.attach = !!(caps.sessionCapabilities && caps.sessionCapabilities.attach);
      setConnection("connected", "up");
      list.refresh();
      team.probe();
      if (view.session) { open(view.session); }
    }, function (error) {
      setConnection("initialize failed: " + error.message, "down");
    });
  }

  /** Attach to (or load) `session` on this socket; its history arrives first. */
  function open(session) {
    conn.opened = session.sessionId;
    view.reset(session);
    var id = session.sessionId;
    var call = conn.attach
      ? request("session/attach", { sessionId: id, role: "controller", historyPolicy: "full" })
      : request("session/load", { sessionId: id, cwd: session.cwd || "/", mcpServers: [] });
    call.then(function () {
      if (view.shows(id)) { view.opened(); }
    }, function (error) {
      if (view.shows(id)) {
        view.follow(function () {
          view.failed(conn.attach ? "session/attach" : "session/load", error);
        });
      }
    });
  }

  // ------------------------------------------------------------------ the session list

  var list = {
    rows: [],
    soonTimer: null,

    refresh: function () {
      request("session/list", {}).then(function (result) {
        list.rows = Array.isArray(result.sessions) ? result.sessions : [];
        list.render();
        // The open session's facts (state, title, live) as the list now has them.
        list.rows.forEach(function (row) {
          if (row && view.session && row.sessionId === view.session.sessionId) {
            Object.keys(row).forEach(function (k) { view.session[k] = row[k]; });
            view.header();
          }
        });
        // The session in the address (#ID): opened once it is listed (after a reload too).
        var wanted = fromHash();
        if (wanted && !view.session) {
          list.rows.forEach(function (row) { if (row && row.sessionId === wanted) { choose(row); } });
        }
      }, function () {});
    },

    soon: function () {
      if (list.soonTimer) { return; }
      list.soonTimer = setTimeout(function () { list.soonTimer = null; list.refresh(); }, 200);
    },

    render: function () {
      var ul = $("session-list");
      ul.replaceChildren();
      $("session-count").textContent = "(" + list.rows.length + ")";
      $("no-sessions").hidden = list.rows.length > 0;
      list.rows.forEach(function (row) {
        if (!row || typeof row.sessionId !== "string") { return; }
        var ours = (row._meta && row._meta.acpJournal) || {};
        var li = el("li");
        var button = el("button", "session-row");
        button.type = "button";
        button.setAttribute("data-session", row.sessionId);
        if (view.session && view.session.sessionId === row.sessionId) {
          button.setAttribute("aria-current", "true");
        }
        button.appendChild(el("span", "s-title", str(row.title) || row.sessionId));
        var facts = el("span", "s-facts");
        facts.appendChild(el("span", "badge " + (ours.live === true ? "live" : "stored"),
          ours.live === true ? "live" : "not live"));
        if (str(row.state)) { facts.appendChild(el("span", "s-state", row.state)); }
        if (str(row.updatedAt)) {
          var time = el("time", "s-updated", ago(row.updatedAt));
          time.setAttribute("datetime", row.updatedAt);
          time.title = row.updatedAt;
          facts.appendChild(time);
        }
        if (str(ours.agent)) { facts.appendChild(el("span", "s-agent", ours.agent)); }
        button.appendChild(facts);
        button.addEventListener("click", function () { choose(row); });
        li.appendChild(button);
        ul.appendChild(li);
      });
    }
  };

  /** "3 min ago" for an RFC 3339 time. */
  function ago(at) {
    var then = Date.parse(at);
    if (isNaN(then)) { return at; }
    var s = Math.max(0, Math.round((Date.now() - then) / 1000));
    if (s < 60) { return s + " s ago"; }
    if (s < 3600) { return Math.round(s / 60) + " min ago"; }
    if (s < 86400) { return Math.round(s / 3600) + " h ago"; }
    return new Date(then).toLocaleDateString();
  }

  /** The session ID in the address's fragment, if any. */
  function fromHash() {
    try { return decodeURIComponent(location.hash.slice(1)); } catch (e) { return ""; }
  }

  /** The user picked a session in the list. */
  function choose(row) {
    if (view.session && view.session.sessionId === row.sessionId && conn.opened === row.sessionId) { return; }
    view.reset(row);
    history.replaceState(null, "", "#" + encodeURIComponent(row.sessionId));
    list.render();
    if (window.matchMedia("(max-width: 56rem)").matches) { $("sessions").open = false; }
    if (conn.opened) {
      // One session per connection: its updates and requests are all for the one shown.
      reconnectNow();
    } else if (conn.ready) {
      open(row);
    } else if (!conn.ws) {
      // Waiting to reconnect: now.
      reconnectNow();
    }
  }

  // ------------------------------------------------------------------ the transcript

  var view = {
    session: null,    // the session shown (its list row)
    turn: null,       // the open turn's <section>
    turns: 0,
    para: null,       // the open paragraph: {voice, node (its text node)}
    tools: {},        // toolCallId -> tool card
    asks: {},         // JSON of a request id -> permission card
    options: {},      // toolCallId -> the options its permission request offered
    plan: null,       // the open turn's plan card
    running: null,    // this page's prompt in flight: {turn}
    echo: "",         // what of our prompt the host may still echo as user_message_chunk
    userMessage: "",  // the messageId of the user's text being shown
    history: false,   // the session's history is arriving (its state comes collapsed, last)
    root: null,       // the box of the subagent being drawn (subagents.js), else the timeline
    turnOpen: false,  // the last turn shown has not ended (this page's, or another client's)

    shows: function (sessionId) {
      return !!view.session && sessionId === view.session.sessionId && conn.opened === sessionId;
    },

    /** Show `session`, empty, until its history arrives. */
    reset: function (session) {
      view.session = session;
      view.turn = null;
      view.turns = 0;
      view.para = null;
      view.tools = {};
      view.asks = {};
      view.options = {};
      view.plan = null;
      view.compactions = {};
      view.tasks = {};
      view.running = null;
      view.echo = "";
      view.userMessage = "";
      view.history = true;
      view.root = null;
      subagents.reset();
      $("timeline").replaceChildren();
      view.header();
      $("prompt").hidden = false;
      $("session-tools").hidden = false;
      $("prompt-error").hidden = true;
      view.turnState();
    },

    header: function () {
      var s = view.session;
      var title = $("session-title");
      title.replaceChildren();
      title.appendChild(document.createTextNode((str(s.title) || "ACP session") + " "));
      title.appendChild(el("code", null, s.sessionId));
      var facts = $("session-facts");
      facts.replaceChildren();
      var ours = (s._meta && s._meta.acpJournal) || {};
      [["agent", ours.agent], ["working directory", s.cwd], ["state", s.state], ["mode", s.mode],
        ["config", s.config],
        ["live", ours.live === true ? "yes" : (ours.live === false ? "no" : undefined)]]
        .forEach(function (f) {
          if (!str(f[1])) { return; }
          facts.appendChild(el("dt", null, f[0]));
          var dd = el("dd");
          dd.appendChild(el("code", null, f[1]));
          facts.appendChild(dd);
        });
    },

    /** The history is in: what comes next is live (a paragraph of its own). */
    opened: function () {
      view.history = false;
      // The history's last turn is over unless the session is running one now.
      view.turnOpen = view.session.state === "running";
      view.closePara();
      view.turnState();
    },

    /** Run `render`, keeping the window at the bottom if it was there. Whether it was is read
     *  once per frame, before the frame's first change (when the layout is still clean), and
     *  the scroll is done once, at the frame: reading the layout after every update would lay
     *  the whole transcript out again for each one, and a fast agent would leave the page
     *  further and further behind. */
    follow: function (render) {
      if (view.stick === null) {
        var root = document.scrollingElement || document.documentElement;
        view.stick = root.scrollHeight - root.scrollTop - window.innerHeight < 120;
        requestAnimationFrame(function () {
          if (view.stick) { window.scrollTo(0, root.scrollHeight); }
          view.stick = null;
        });
      }
      render();
    },

    /** Keep to the bottom at the next frame (`null`: not read this frame yet). */
    stick: null,

    connectionLost: function () {
      Object.keys(view.asks).forEach(function (key) {
        view.settleCard(view.asks[key], "the connection dropped: the host asks again once it is back");
      });
      view.asks = {};
      if (view.running) {
        view.running = null;
        view.turnState();
      }
    },

    turnState: function () {
      $("turn-state").textContent = view.running ? "running…" : "";
      $("send").disabled = !!view.running;
    },

    where: function () { return view.turn || view.top(); },

    /** The timeline being drawn: the session's, or a subagent's box. */
    top: function () { return view.root || $("timeline"); },

    /** Where a change of state (mode, config) goes: the turn it happened in while one runs,
     *  else between the turns (not inside the last one, which ended before it). */
    now: function () {
      return view.turnOpen && view.turn ? view.turn : view.top();
    },

    add: function (node) {
      view.closePara();
      view.where().appendChild(node);
      return node;
    },

    closePara: function () { view.para = null; },

    startTurn: function (text) {
      view.closePara();
      view.turns += 1;
      var section = el("section", "turn");
      if (!view.root) { section.id = "turn-" + view.turns; }
      section.appendChild(el("h3", null, "Turn " + view.turns));
      view.top().appendChild(section);
      view.turn = section;
      view.turnOpen = true;
      view.plan = null;
      // Agents number tool calls per turn (call_1 again in the next one): a card per turn.
      view.tools = {};
      var user = el("div", "user", text);
      section.appendChild(user);
      view.para = {
        voice: "user",
        node: user.firstChild || user.appendChild(document.createTextNode("")),
        block: user,
      };
      return section;
    },

    /** Text of `voice` (agent, thought, user): one paragraph while the same voice goes on. */
    chunk: function (voice, text) {
      if (view.para && view.para.voice === voice) {
        var node = view.para.node;
        if (node.length >= SEGMENT && node.substringData(node.length - 1, 1) === "\n") {
          // A long paragraph goes on in a block of its own from a line's end: the browser then
          // lays out only the last block for each chunk, not the whole paragraph again (which
          // would slow a long answer down chunk after chunk). It reads the same.
          var seg = el("div", "seg");
          node = seg.appendChild(document.createTextNode(text));
          view.para.block.appendChild(seg);
          view.para.node = node;
          return;
        }
        node.appendData(text);
        return;
      }
      if (voice === "user") {
        view.startTurn(text);
        return;
      }
      var div = view.add(el("div", voice === "agent" ? "agent"
        : (voice.indexOf("message") === 0 ? "message" : "thought")));
      var node = document.createTextNode(text);
      div.appendChild(node);
      view.para = { voice: voice, node: node, block: div };
    },

    meta: function (text) { view.add(el("div", "meta", text)); },

    /** A change of state: in the session's facts; in the timeline where it happened when it
     *  came live (a replayed history gives only the latest state, after its last turn: drawn
     *  there, it would sit in a turn it did not happen in). */
    stateChange: function (fact, value, text) {
      view.session[fact] = value;
      view.header();
      if (view.history) { return; }
      view.closePara();
      view.now().appendChild(el("div", "meta", text));
    },

    failed: function (method, error) {
      view.add(el("div", "error", method + " failed: " + error.code + " " + error.message));
    },

    update: function (u) {
      var kind = str(u.sessionUpdate);
      var text = u.content && typeof u.content.text === "string" ? u.content.text : null;
      switch (kind) {
        case "user_message_chunk":
          if (text === null) { return; }
          if (view.echo && view.echo.indexOf(text) === 0) {
            // The host's echo of the prompt this page sent (shown already).
            view.echo = view.echo.slice(text.length);
            return;
          }
          view.echo = "";
          // A prompt's blocks share a messageId (the journal's replay gives each prompt one):
          // another id is another prompt, so another turn.
          var message = str(u.messageId);
          if (message !== view.userMessage) { view.closePara(); }
          view.userMessage = message;
          view.chunk("user", text);
          return;
        case "agent_message_chunk":
          view.echo = "";
          if (text !== null) { view.chunk("agent", text); }
          return;
        case "agent_thought_chunk":
          view.echo = "";
          if (text !== null) { view.chunk("thought", text); }
          return;
        case "tool_call":
        case "tool_call_update":
          view.echo = "";
          view.tool(u, kind === "tool_call");
          return;
        case "plan":
          view.planCard(u);
          return;
        case "plan_update":
          view.planCard(u.plan || {});
          return;
        case "current_mode_update":
          view.stateChange("mode", str(u.currentModeId), "mode → " + (str(u.currentModeId) || "?"));
          return;
        case "config_option_update":
          var set = (Array.isArray(u.configOptions) ? u.configOptions : []).map(function (o) {
            var v = o && o.currentValue;
            return (str(o && o.id) || "?") + " = " + (typeof v === "string" ? v : JSON.stringify(v));
          });
          view.stateChange("config", set.join(", "), "config: " + set.join(", "));
          return;
        case "session_info_update":
          if (str(u.title)) {
            view.meta("title: " + u.title);
            view.session.title = u.title;
            view.header();
          }
          var ended = u._meta && u._meta.acpJournal && u._meta.acpJournal.turnEnded;
          if (ended && typeof ended === "object" && view.turn && !view.turn.querySelector(".turn-end")) {
            // Another client's turn ended (the host tells; the prompt's answer went to that
            // client).
            var who = str(ended.client) || str(ended.by);
            var how = str(ended.stopReason) || (str(ended.error) ? "failed: " + ended.error : "?");
            view.endTurn(view.turn, str(ended.stopReason) ? "turn-end" : "turn-end failed",
              how + (who ? " · by " + who : ""));
          }
          return;
        case "notice":
          // Not part of the history (the host never replays one): drawn where it came.
          view.add(el("div", "notice", "! " + (str(u.severity) || "info") +
            " notice (not part of the history): " + str(u.title) +
            (str(u.description) ? ": " + u.description : "")));
          return;
        case "compaction_update":
        case "compaction_summary_chunk":
          view.compaction(u, text);
          return;
        case "async_task_spawned":
        case "async_task_progress":
        case "async_task_state_update":
          view.task(kind, u);
          return;
        case "subagent_update":
        case "session_message":
        case "session_message_chunk":
          subagents.update(kind, u);
          return;
        default:
          return;
      }
    },

    /** A compaction (by its ID): one line with its status, its summary (the update's, or its
     *  chunks folded in as they come) in a paragraph under it, as the export draws them. */
    compaction: function (u, text) {
      var id = str(u.compactionId) || "?";
      var c = view.compactions[id];
      if (!c || !c.line.isConnected) {
        // A first-seen ID, even a chunk's, is an in-progress compaction.
        c = { line: view.add(el("div", "compaction", "── compaction in_progress")), summary: null };
        view.compactions[id] = c;
      } else {
        view.closePara();
      }
      var addSummary = function (t) {
        if (!c.summary) {
          c.summary = el("div", "summary");
          c.line.after(c.summary);
        }
        c.summary.textContent += t;
      };
      if (u.sessionUpdate === "compaction_summary_chunk") {
        if (text !== null) { addSummary(text); }
        return;
      }
      if (str(u.status)) { c.line.textContent = "── compaction " + u.status; }
      if (!("summary" in u)) { return; }
      // A whole summary replaces the one there (null or [] clears it).
      if (c.summary) { c.summary.textContent = ""; }
      addSummary((Array.isArray(u.summary) ? u.summary : [u.summary]).map(function (b) {
        return b && typeof b.text === "string" ? b.text : "";
      }).join(""));
    },

    /** A background task (by its ID): one line, its state and detail updated as they change. */
    task: function (kind, u) {
      var id = str(u.asyncTaskId) || "?";
      var t = view.tasks[id];
      if (!t || !t.line.isConnected) {
        t = { line: view.add(el("div", "task")), name: id };
        view.tasks[id] = t;
      } else {
        view.closePara();
      }
      if (str(u.name)) { t.name = u.name; }
      var state = kind === "async_task_state_update" ? (str(u.state) || "?") : "running";
      var detail = kind === "async_task_spawned" ? str(u.description)
        : (str(u.summary) || str(u.description));
      t.line.textContent = "⧗ task " + t.name + ": " + state + (detail ? " — " + detail : "");
    },

    planCard: function (plan) {
      var card = view.plan;
      if (!card || card.parentNode !== view.where()) {
        card = view.add(el("div", "plan"));
        view.plan = card;
      } else {
        view.closePara();
      }
      card.replaceChildren(document.createTextNode("plan"));
      var ul = el("ul");
      (Array.isArray(plan.entries) ? plan.entries : []).forEach(function (entry) {
        var status = str(entry && entry.status) || "pending";
        var mark = status === "completed" ? "[x]" : (status === "in_progress" ? "[>]" : "[ ]");
        ul.appendChild(el("li", "p-" + status, mark + " " + str(entry && entry.content)));
      });
      card.appendChild(ul);
    },

    /** A tool call, or an update merged into its card. */
    tool: function (u, isNew) {
      var id = str(u.toolCallId) || "?";
      var card = view.tools[id];
      if (!card) {
        var details = el("details", "tool");
        details.setAttribute("data-tool", id);
        card = { node: details, summary: el("summary"), body: el("div", "body"), call: { toolCallId: id } };
        details.appendChild(card.summary);
        details.appendChild(card.body);
        view.tools[id] = card;
        view.add(details);
      } else {
        view.closePara();
      }
      var call = card.call;
      ["title", "kind", "status", "locations", "content", "rawInput", "rawOutput"].forEach(function (f) {
        if (Object.prototype.hasOwnProperty.call(u, f)) { call[f] = u[f]; }
      });
      if (isNew && !call.status) { call.status = "pending"; }
      var permission = u._meta && u._meta.acpJournal && u._meta.acpJournal.permission;
      if (permission && typeof permission === "object") { call.permission = permission; }
      renderTool(card, view.options[id]);
    },

    /** The host asks this page's permission: a card with the options as buttons. */
    permissionAsked: function (id, params) {
      var toolCall = params.toolCall || {};
      var toolId = str(toolCall.toolCallId);
      var title = str(toolCall.title) ||
        (view.tools[toolId] && str(view.tools[toolId].call.title)) || "a tool call";
      var options = Array.isArray(params.options) ? params.options : [];
      if (toolId) { view.options[toolId] = options; }
      var card = el("div", "permission asking");
      card.appendChild(document.createTextNode("Permission for "));
      card.appendChild(el("b", null, title));
      var choices = el("div", "choices");
      options.forEach(function (option) {
        var optionId = str(option && option.optionId);
        var kind = str(option && option.kind);
        var button = el("button", "option " + (kind.indexOf("allow") === 0 ? "allow" : "reject"),
          str(option && option.name) || optionId);
        button.type = "button";
        button.setAttribute("data-option", optionId);
        button.addEventListener("click", function () {
          if (!card.parentNode || card.getAttribute("data-answered")) { return; }
          answer(id, { outcome: { outcome: "selected", optionId: optionId } });
          delete view.asks[JSON.stringify(id)];
          card.setAttribute("data-answered", optionId);
          card.classList.remove("asking");
          choices.remove();
          card.appendChild(document.createTextNode(": "));
          card.appendChild(el("b", "choice", optionId));
          if (str(option.name)) { card.appendChild(document.createTextNode(" (" + option.name + ")")); }
        });
        choices.appendChild(button);
      });
      card.appendChild(choices);
      view.asks[JSON.stringify(id)] = card;
      view.add(card);
      card.scrollIntoView({ block: "nearest" });
    },

    /** The host took back request `id` (another client answered it): true when it was ours. */
    settle: function (id) {
      var key = JSON.stringify(id);
      var card = view.asks[key];
      if (!card) { return false; }
      delete view.asks[key];
      view.settleCard(card, "answered elsewhere");
      return true;
    },

    settleCard: function (card, why) {
      card.classList.remove("asking");
      card.setAttribute("data-settled", "true");
      var choices = card.querySelector(".choices");
      if (choices) { choices.remove(); }
      card.appendChild(document.createTextNode(" "));
      card.appendChild(el("span", "settled", why));
    },

    /** This page prompts: a turn of its own, ended by the prompt's answer. */
    prompt: function (text) {
      var session = view.session;
      view.startTurn(text);
      view.closePara();
      view.echo = text;
      var turn = view.turn;
      var started = Date.now();
      view.running = { turn: turn };
      view.turnState();
      var seconds = function () { return ((Date.now() - started) / 1000).toFixed(1) + " s"; };
      request("session/prompt", { sessionId: session.sessionId, prompt: [{ type: "text", text: text }] })
        .then(function (result) {
          if (view.session !== session) { return; }
          view.follow(function () {
            view.endTurn(turn, "turn-end", (str(result.stopReason) || "?") + " · " + seconds());
          });
        }, function (error) {
          if (view.session !== session) { return; }
          var refused = turn.children.length <= 2; // its heading and the prompt: nothing ran
          showPromptError(error.message);
          if (refused) {
            turn.remove();
            view.turns -= 1;
            if (view.turn === turn) { view.turn = null; }
            if (!$("prompt-text").value) { $("prompt-text").value = text; }
          } else {
            view.follow(function () {
              turn.appendChild(el("div", "error", "session/prompt failed: " + error.code + " " + error.message));
              view.endTurn(turn, "turn-end failed", "failed · " + seconds());
            });
          }
          if (view.running && view.running.turn === turn) { view.running = null; }
          view.turnState();
        });
    },

    endTurn: function (turn, cls, text) {
      if (view.turn === turn) { view.closePara(); view.turnOpen = false; }
      turn.appendChild(el("div", cls, text));
      if (view.running && view.running.turn === turn) { view.running = null; }
      view.turnState();
    }
  };

  /** The subagents' timelines, each in its parent's (subagents.js). */
  var subagents = window.acpJournalSubagents({ el: el, str: str, view: view });

  // ------------------------------------------------------------------ the controls

  function showPromptError(message) {
    var e = $("prompt-error");
    e.textContent = "The prompt failed: " + message;
    e.hidden = false;
  }

  $("prompt").addEventListener("submit", function (e) {
    e.preventDefault();
    var box = $("prompt-text");
    var text = box.value;
    if (!text.trim() || !view.session || view.running) { return; }
    if (conn.opened !== view.session.sessionId) {
      showPromptError("not connected to the session yet");
      return;
    }
    $("prompt-error").hidden = true;
    box.value = "";
    view.follow(function () { view.prompt(text); });
  });

  $("prompt-text").addEventListener("keydown", function (e) {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { $("prompt").requestSubmit(); }
  });

  $("cancel").addEventListener("click", function () {
    if (!view.session || conn.opened !== view.session.sessionId) { return; }
    notify("session/cancel", { sessionId: view.session.sessionId });
    view.follow(function () { view.add(el("div", "cancelled", "cancelled by the user")); });
  });

  // The export's buttons.
  var tools = function () { return document.querySelectorAll("details.tool"); };
  $("expand-tools").addEventListener("click", function () { tools().forEach(function (d) { d.open = true; }); });
  $("collapse-tools").addEventListener("click", function () { tools().forEach(function (d) { d.open = false; }); });
  $("toggle-thoughts").addEventListener("click", function (e) {
    var hidden = document.body.classList.toggle("hide-thoughts");
    e.target.textContent = hidden ? "Show thoughts" : "Hide thoughts";
  });

  // ------------------------------------------------------------------ the team view (team.js)

  var team = window.acpJournalTeam({ $: $, el: el, str: str, signIn: signIn, tokenKey: TOKEN_KEY });

  // This host's list, while it shows (with `--store` the host reads the store to answer it:
  // a page left on the team view would cost the store a `list` every LIST_EVERY_MS); again when
  // it is shown.
  var connected = function () { return conn.ws && conn.ws.readyState === WebSocket.OPEN; };
  setInterval(function () {
    if (connected() && $("team").hidden) { list.refresh(); }
  }, LIST_EVERY_MS);
  $("live-tab").addEventListener("click", function () { if (connected()) { list.refresh(); } });
  if (takeToken()) { connect(); } else { signIn(false); }
})();
