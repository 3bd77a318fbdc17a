// acp-journal serve's page, its team view (with `serve --store`), loaded before page.js, which
// calls window.acpJournalTeam with the helpers the two share (`$`, `el`, `str`, `signIn`, the
// token's key) and gets the view back.
//
// With `serve --store`, a team view too: the store's sessions (/team/sessions, filtered and
// paged), a search of them (/team/search), their usage by day per agent and per host
// (/team/usage: charts the server drew as SVG, parsed inert as XML, each with its numbers as a
// table under it; the tokens' as CSV from /team/usage.csv) and one opened (/team/session: the HTML export,
// rendered and escaped by the server, parsed inert with DOMParser — no script of it runs —
// and its header and timeline adopted, their ids prefixed), with a Share button that makes a
// read-only link to it (POST /team/share). Those are fetched with the token as a bearer
// header, never a cookie.
(function () {
  "use strict";

  /** How soon a followed session is asked about again after the host could not answer. */
  var FOLLOW_RETRY_MS = 5000;

  window.acpJournalTeam = function (ui) {
    var $ = ui.$, el = ui.el, str = ui.str, signIn = ui.signIn, TOKEN_KEY = ui.tokenKey;

    var team = {
      page: 0,
      pages: 0,
      filters: "",
      /** `path` fetched with the token (by `method`, GET unless said); a refused token signs
       *  out, another failure throws its text. */
      get: function (path, method) {
        var token = sessionStorage.getItem(TOKEN_KEY) || "";
        return fetch(path, {
          method: method || "GET",
          headers: { Authorization: "Bearer " + token },
          cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer"
        }).then(function (r) {
          if (r.status === 401) {
            signIn(true);
            var refused = new Error("the token was refused");
            refused.refused = true;
            throw refused;
          }
          if (!r.ok) {
            return r.text().then(function (t) {
              var failed = new Error(t.trim() || ("HTTP " + r.status));
              failed.status = r.status;
              throw failed;
            });
          }
          return r;
        });
      },
      /** Whether this host serves a store (the page says): then the Team button shows. */
      probe: function () {
        $("team-tab").hidden = document.body.getAttribute("data-team") !== "on";
      },
      show: function (on) {
        $("team").hidden = !on;
        $("layout").hidden = on;
        $("team-tab").setAttribute("aria-pressed", on ? "true" : "false");
        $("live-tab").setAttribute("aria-pressed", on ? "false" : "true");
        if (on) { team.load(); follow.resume(); }
      },
      status: function (text) { $("team-status").textContent = text; },
      /** The filters of the form, as a query string. */
      query: function () {
        var q = [];
        ["agent", "host", "cwd", "state", "from", "to"].forEach(function (name) {
          var field = $("team-filters").elements[name];
          var value = field ? field.value.trim() : "";
          if (value) { q.push(name + "=" + encodeURIComponent(value)); }
        });
        return q.join("&");
      },
      load: function () {
        team.status("reading the store…");
        var path = "/team/sessions?page=" + team.page + (team.filters ? "&" + team.filters : "");
        team.get(path).then(function (r) { return r.json(); }).then(function (answer) {
          team.pages = answer.pages || 0;
          team.render(Array.isArray(answer.sessions) ? answer.sessions : [], answer.total || 0);
        }, function (error) { team.status(error.message); });
      },
      render: function (rows, total) {
        var ul = $("team-list");
        ul.textContent = "";
        $("team-found").hidden = true;
        ul.hidden = false;
        rows.forEach(function (row) {
          var li = el("li");
          var button = el("button", "session-row team-row");
          button.type = "button";
          button.setAttribute("data-session", str(row.session));
          button.appendChild(el("span", "s-title", str(row.title) || str(row.session)));
          var facts = el("span", "s-facts");
          facts.appendChild(el("span", "badge " + (row.state === "live" ? "live" : "stored"), str(row.state)));
          facts.appendChild(el("span", "s-agent", str(row.agent_name) || str(row.agent)));
          facts.appendChild(el("span", "s-hosts", (Array.isArray(row.hosts) ? row.hosts : []).map(str).join(", ")));
          facts.appendChild(el("span", "s-cwd", str(row.cwd)));
          facts.appendChild(el("span", "s-turns", (Number(row.turns) || 0) + " turns"));
          facts.appendChild(el("span", "s-updated", str(row.updated)));
          button.appendChild(facts);
          button.addEventListener("click", function () { team.open(str(row.session), 0); });
          li.appendChild(button);
          ul.appendChild(li);
        });
        team.status(total + (total === 1 ? " session" : " sessions") + (team.filters ? " match the filters" : " in the store"));
        $("team-pages").hidden = team.pages < 2;
        $("team-page").textContent = "page " + (team.page + 1) + " of " + team.pages;
        $("team-newer").disabled = team.page === 0;
        $("team-older").disabled = team.page + 1 >= team.pages;
      },
      search: function (text) {
        team.status("searching…");
        team.get("/team/search?q=" + encodeURIComponent(text)).then(function (r) { return r.json(); }).then(function (answer) {
          var found = Array.isArray(answer.matches) ? answer.matches : [];
          var ul = $("team-found");
          ul.textContent = "";
          found.forEach(function (m) {
            var li = el("li");
            var button = el("button", "session-row team-hit");
            button.type = "button";
            button.setAttribute("data-session", str(m.session));
            button.setAttribute("data-turn", String(Number(m.turn) || 0));
            button.appendChild(el("span", "s-title", str(m.session)));
            var facts = el("span", "s-facts");
            facts.appendChild(el("span", "", "turn " + (Number(m.turn) || 0)));
            facts.appendChild(el("span", "", str(m.from)));
            button.appendChild(facts);
            button.appendChild(el("span", "s-context", "…" + str(m.context) + "…"));
            button.addEventListener("click", function () { team.open(str(m.session), Number(m.turn) || 0, text); });
            li.appendChild(button);
            ul.appendChild(li);
          });
          ul.hidden = false;
          $("team-list").hidden = true;
          $("team-pages").hidden = true;
          team.status(found.length + (found.length === 1 ? " message holds " : " messages hold ") +
            JSON.stringify(text) + (answer.more ? " (the first shown)" : ""));
        }, function (error) { team.status(error.message); });
      },
      /** A chart the server drew (SVG markup, its text escaped there), parsed inert as XML and
       *  adopted; a session it links to opens here. Nothing when it does not parse. */
      chart: function (markup) {
        var doc = new DOMParser().parseFromString(str(markup), "image/svg+xml");
        var svg = doc.documentElement;
        if (!svg || svg.localName !== "svg" || doc.getElementsByTagName("parsererror").length) { return null; }
        svg.querySelectorAll("script, foreignObject").forEach(function (n) { n.remove(); });
        var chart = document.importNode(svg, true);
        chart.querySelectorAll("a[data-session]").forEach(function (a) {
          a.addEventListener("click", function (e) {
            e.preventDefault();
            team.open(a.getAttribute("data-session"), 0);
          });
        });
        return chart;
      },
      /** A table of `rows` under `heads`, each row's cells `cells(row)`. */
      table: function (cls, heads, rows, cells) {
        var table = el("table", "usage-table " + cls);
        var head = el("tr");
        var first = rows.length ? cells(rows[0]) : [];
        heads.forEach(function (c, i) {
          var th = el("th", typeof first[i] === "number" ? "num" : "", c);
          th.scope = "col";
          head.appendChild(th);
        });
        table.appendChild(el("thead")).appendChild(head);
        var body = el("tbody");
        rows.forEach(function (row) {
          var tr = el("tr");
          // Numbers to the right.
          cells(row).forEach(function (c) { tr.appendChild(el("td", typeof c === "number" ? "num" : "", c)); });
          body.appendChild(tr);
        });
        table.appendChild(body);
        return table;
      },
      /** The usage: each chart the server drew, and under it its numbers, a table behind a
       *  disclosure (for the tokens per day, a CSV download too). */
      usage: function () {
        follow.stop();
        var article = $("team-session");
        article.textContent = "";
        article.removeAttribute("data-follow");
        article.removeAttribute("data-session");
        article.appendChild(el("p", "empty", "counting…"));
        team.get("/team/usage").then(function (r) { return r.json(); }).then(function (answer) {
          var list = function (v) { return Array.isArray(v) ? v : []; };
          var num = function (v) { return Number(v) || 0; };
          var daily = list(answer.daily);
          var charts = answer.charts || {};
          article.textContent = "";
          article.appendChild(el("h2", "", "Usage"));
          article.appendChild(el("p", "usage-summary", str(answer.summary)));
          article.appendChild(el("p", "usage-note", "Charts by day show at most the last " + num(answer.max_days) +
            " days; each one's numbers, every day, are in the table under it. Each bar's exact numbers are its tooltip."));
          var section = function (key, heading, table, link) {
            var part = el("section", "usage-part usage-part-" + key);
            part.appendChild(el("h3", "", heading));
            // A chart, or a list of them (the costs: one per currency).
            [].concat(charts[key] || []).forEach(function (markup) {
              var chart = team.chart(markup);
              if (chart) { part.appendChild(chart); }
            });
            var details = el("details", "usage-numbers");
            details.appendChild(el("summary", "", "The numbers: " + heading.toLowerCase()));
            details.appendChild(table);
            part.appendChild(details);
            if (link) { part.appendChild(el("p")).appendChild(link); }
            article.appendChild(part);
          };
          // A row's cost in `currency` (a decimal, exact, as the server wrote it), or "".
          var currencies = list(answer.currencies);
          var costIn = function (d, currency) {
            var c = list(d.cost).filter(function (c) { return c.currency === currency; })[0];
            return c ? str(c.amount) : "";
          };
          [["agent", "Tokens per agent and day"], ["host", "Tokens per host and day"]].forEach(function (group) {
            var rows = daily.filter(function (d) { return d.by === group[0]; });
            // A cost column per currency the group's rows have a cost in, as in its CSV.
            var named = currencies.filter(function (c) { return rows.some(function (d) { return costIn(d, c) !== ""; }); });
            var table = team.table("usage-" + group[0], ["day", group[0], "sessions", "turns", "input tokens", "output tokens"]
              .concat(named.map(function (c) { return "cost (" + c + ")"; })), rows, function (d) {
                return [str(d.day), str(d.name), num(d.sessions), num(d.turns), num(d.input_tokens), num(d.output_tokens)]
                  .concat(named.map(function (c) { return costIn(d, c); }));
              });
            // The numbers as the server writes them (/team/usage.csv), fetched with the token
            // and saved: a plain link would go without it.
            var link = el("a", "usage-csv usage-csv-" + group[0], group[1] + " as CSV");
            link.href = "/team/usage.csv?by=" + group[0];
            link.download = "usage-" + group[0] + ".csv";
            link.addEventListener("click", function (e) {
              e.preventDefault();
              team.get(link.getAttribute("href")).then(function (r) { return r.blob(); }).then(function (blob) {
                var save = el("a");
                save.href = URL.createObjectURL(blob);
                save.download = link.download;
                save.click();
                setTimeout(function () { URL.revokeObjectURL(save.href); }, 0);
              }, function (error) { team.status(error.message); });
            });
            section(group[0], group[1], table, link);
          });
          [["agent", "Cost per agent and day"], ["host", "Cost per host and day"]].forEach(function (group) {
            var rows = [];
            daily.filter(function (d) { return d.by === group[0]; }).forEach(function (d) {
              list(d.cost).forEach(function (c) { rows.push([str(d.day), str(d.name), str(c.currency), str(c.amount), num(c.turns)]); });
            });
            section("cost-" + group[0], group[1], team.table("usage-cost-" + group[0],
              ["day", group[0], "currency", "cost", "turns with a cost"], rows, function (r) { return r; }));
          });
          section("activity", "Sessions and turns per day", team.table("usage-activity", ["day", "sessions", "turns"],
            list(answer.activity), function (a) { return [str(a.day), num(a.sessions), num(a.turns)]; }));
          section("costliest", "The sessions that cost most", team.table("usage-costliest",
            ["session", "title", "agent", "turns", "input tokens", "output tokens", "cost"], list(answer.costliest), function (c) {
              return [str(c.session), str(c.title), str(c.agent), num(c.turns), num(c.input_tokens), num(c.output_tokens),
                list(c.cost).map(function (k) { return str(k.amount) + " " + str(k.currency); }).join(" + ")];
            }));
          section("stops", "Turns by stop reason", team.table("usage-stops", ["stop reason", "turns"],
            list(answer.stops), function (r) { return [str(r.reason), num(r.turns)]; }));
          article.focus();
        }, function (error) {
          article.textContent = "";
          article.appendChild(el("p", "error", error.message));
        });
      },
      /** Each occurrence of `text` in the text of `root`, wrapped in a <mark> (text nodes split,
       *  nothing parsed). */
      mark: function (root, text) {
        var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        var nodes = [];
        for (var n = walker.nextNode(); n; n = walker.nextNode()) { nodes.push(n); }
        nodes.forEach(function (node) {
          var at = node.data.indexOf(text);
          while (at >= 0) {
            var hit = node.splitText(at);
            node = hit.splitText(text.length);
            var mark = el("mark", "found");
            hit.parentNode.replaceChild(mark, hit);
            mark.appendChild(hit);
            at = node.data.indexOf(text);
          }
        });
      },
      /** The Share form of session `id`: how long, a button that makes a read-only link to it
       *  (POST /team/share), and the link made, selected for copying. */
      shareForm: function (id) {
        var form = el("form", "team-share");
        var label = el("label", "", "Share for ");
        var days = el("select", "share-days");
        days.name = "days";
        [["1", "1 day"], ["7", "7 days"], ["30", "30 days"]].forEach(function (o) {
          var option = el("option", "", o[1]);
          option.value = o[0];
          if (o[0] === "7") { option.selected = true; }
          days.appendChild(option);
        });
        label.appendChild(days);
        form.appendChild(label);
        var button = el("button", "share-make", "Share");
        button.type = "submit";
        form.appendChild(button);
        var out = el("p", "share-out");
        out.setAttribute("role", "status");
        form.appendChild(out);
        form.addEventListener("submit", function (e) {
          e.preventDefault();
          out.textContent = "making a link…";
          team.get("/team/share?id=" + encodeURIComponent(id) + "&days=" + encodeURIComponent(days.value), "POST")
            .then(function (r) { return r.json(); }).then(function (made) {
              out.textContent = "";
              var link = el("input", "share-link");
              link.readOnly = true;
              link.value = location.origin + str(made.path);
              link.setAttribute("aria-label", "The link: read-only, this session only");
              out.appendChild(link);
              out.appendChild(el("span", "share-note", " read-only, this session only, until " + str(made.expires) +
                " (revoke it with acp-journal share --revoke)"));
              link.focus();
              link.select();
            }, function (error) { out.textContent = error.message; });
        });
        return form;
      },
      /** Session `id`, rendered by the server; `turn` (from 1) scrolled to and marked, and in it
       *  the `text` searched for. While its host still writes it, it is followed (`follow`). */
      open: function (id, turn, text) {
        follow.stop();
        var article = $("team-session");
        article.textContent = "";
        article.removeAttribute("data-follow");
        article.appendChild(el("p", "empty", "reading the session…"));
        var session = follow.start(id);
        follow.ask(session).then(function (answer) {
          if (!follow.is(session)) { return; }
          article.textContent = "";
          article.setAttribute("data-session", id);
          article.appendChild(team.shareForm(id));
          session.note = article.appendChild(el("p", "team-follow"));
          session.note.setAttribute("role", "status");
          session.box = article.appendChild(el("div", "team-export"));
          follow.adopt(session.box, follow.parts(answer.html), follow.DEPTH);
          var turns = article.querySelectorAll("section.turn");
          var hit = turn > 0 ? turns[turn - 1] : null;
          if (hit) {
            hit.classList.add("hit");
            if (text) { team.mark(hit, text); }
            hit.scrollIntoView({ block: "start" });
          } else {
            article.focus();
          }
          follow.answered(session, answer);
        }, function (error) {
          if (!follow.is(session)) { return; }
          follow.stop();
          article.textContent = "";
          article.appendChild(el("p", "error", error.message));
        });
      }
    };

    // ---------------------------------------------------------------- a session followed

    /** The session opened in the team view, followed while its host still writes it: the
     *  server says so, and how soon to ask again (the acp-journal-follow header, in ms); the
     *  page then asks with the tag of the render it has (`after=`), and the server answers 204
     *  when nothing changed, else the whole render (one renderer: the export's), which is
     *  patched in: what the server rendered the same is kept as it is (a tool call opened, the
     *  focus, a search's marks), so only the turns that changed are replaced. At the bottom,
     *  the page stays at the bottom as turns arrive; elsewhere, nothing moves. Not asked while
     *  the tab or the team view is hidden; stopped when the session ends, another is opened,
     *  the usage shown, or the token refused. */
    var follow = {
      /** Levels of the render patched below the box (the box, header and main, the timeline
       *  and wire sections, a turn and the wire's details, a turn's cards). */
      DEPTH: 4,
      /** The session followed: {id, tag, note, box, timer, waiting, following}; null when
       *  none. */
      now: null,
      /** What each node adopted was when the server rendered it (its markup). */
      rendered: new WeakMap(),
      start: function (id) {
        follow.now = { id: id, tag: "", note: null, box: null, timer: 0, waiting: false, following: false };
        return follow.now;
      },
      is: function (session) { return follow.now === session; },
      stop: function () {
        if (follow.now) { clearTimeout(follow.now.timer); }
        follow.now = null;
      },
      /** The server's answer for `session`: {html} (null when unchanged), its tag, and in how
       *  many ms to ask again (0: the session is not followed). */
      ask: function (session) {
        var path = "/team/session?id=" + encodeURIComponent(session.id) +
          (session.tag ? "&after=" + session.tag : "");
        return team.get(path).then(function (r) {
          var every = Number(r.headers.get("acp-journal-follow")) || 0;
          var tag = (r.headers.get("etag") || "").replace(/"/g, "");
          var answer = { tag: /^[0-9a-f]{24}$/.test(tag) ? tag : "", every: every > 0 ? Math.min(Math.max(every, 250), 60000) : 0 };
          if (r.status === 204) { answer.html = null; return answer; }
          return r.text().then(function (html) { answer.html = html; return answer; });
        });
      },
      /** After an answer: ask again when the server said so, else say the session ended. */
      answered: function (session, answer) {
        session.tag = answer.tag;
        var article = $("team-session");
        if (!answer.every || !answer.tag) {
          article.setAttribute("data-follow", "off");
          follow.say(session, session.following ? "The session ended: followed no more." : "");
          if (follow.is(session)) { follow.now = null; }
          return;
        }
        session.following = true;
        article.setAttribute("data-follow", "on");
        follow.say(session, "Live: new turns appear here as its host ships them.");
        session.timer = setTimeout(function () { follow.look(session); }, answer.every);
      },
      /** `text` in `session`'s note (none: hidden); a screen reader hears it once, not at every
       *  look. */
      say: function (session, text) {
        if (session.note.textContent !== text) { session.note.textContent = text; }
        session.note.hidden = !text;
      },
      /** Ask again, unless the page is not shown (then asked again once it is). */
      look: function (session) {
        if (!follow.is(session)) { return; }
        if (document.hidden || $("team").hidden) { session.waiting = true; return; }
        follow.ask(session).then(function (answer) {
          if (!follow.is(session)) { return; }
          if (answer.html !== null) { follow.update(session, answer.html); }
          follow.answered(session, answer);
        }, function (error) {
          if (!follow.is(session)) { return; }
          if (error.refused || error.status === 404) {
            // Signed out, or the session is gone from the store (erased): as it was last read.
            follow.stop();
            $("team-session").setAttribute("data-follow", "off");
            follow.say(session, error.refused ? "" : "Followed no more: " + error.message);
            return;
          }
          follow.say(session, "Not updated (" + error.message + "): trying again.");
          session.timer = setTimeout(function () { follow.look(session); }, FOLLOW_RETRY_MS);
        });
      },
      /** The page is shown again: ask now what was not asked meanwhile. */
      resume: function () {
        var session = follow.now;
        if (session && session.waiting && !document.hidden && !$("team").hidden) {
          session.waiting = false;
          follow.look(session);
        }
      },
      /** The export's header and main in `html`, parsed inert in a box of their own: the
       *  export's head (its stylesheet, which the page's already holds, and its policy) left
       *  out (its body starts at the first "<body", which no escaped text can hold), no script
       *  or nav of it, its ids prefixed. */
      parts: function (html) {
        var body = html.indexOf("<body");
        var doc = new DOMParser().parseFromString(body < 0 ? "" : html.slice(body), "text/html");
        var box = doc.createElement("div");
        ["body > header", "body > main"].forEach(function (sel) {
          var part = doc.querySelector(sel);
          if (!part) { return; }
          part.querySelectorAll("script, nav").forEach(function (n) { n.remove(); });
          part.querySelectorAll("[id]").forEach(function (n) { n.id = "export-" + n.id; });
          part.querySelectorAll("a[href^='#']").forEach(function (a) { a.setAttribute("href", "#export-" + a.getAttribute("href").slice(1)); });
          box.appendChild(part);
        });
        return box;
      },
      /** `node`'s markup (a text's: its text). */
      markup: function (node) { return node.nodeType === 1 ? node.outerHTML : "#" + node.nodeType + node.nodeValue; },
      /** `node` noted as the server rendered it, and what it holds down to `depth` levels. */
      sign: function (node, depth) {
        follow.rendered.set(node, follow.markup(node));
        if (depth > 0) { node.childNodes.forEach(function (c) { follow.sign(c, depth - 1); }); }
      },
      /** Whether `old` is the element `fresh` renders, changed within: the same name, `fresh`'s
       *  attributes (its classes among `old`'s: a search marks a turn). */
      same: function (old, fresh) {
        if (old.nodeType !== 1 || fresh.nodeType !== 1 || old.localName !== fresh.localName) { return false; }
        return Array.prototype.every.call(fresh.attributes, function (a) {
          if (a.name !== "class") { return old.getAttribute(a.name) === a.value; }
          return a.value.split(/\s+/).every(function (c) { return !c || old.classList.contains(c); });
        });
      },
      /** `into`'s children made `fresh`'s (parsed, not adopted yet): each the server rendered
       *  the same kept, one of the same element patched in turn down to `depth` levels, any
       *  other adopted in its place; those past the end removed. */
      adopt: function (into, fresh, depth) {
        var olds = Array.prototype.slice.call(into.childNodes);
        Array.prototype.slice.call(fresh.childNodes).forEach(function (n, i) {
          var old = olds[i];
          var markup = follow.markup(n);
          if (old && follow.rendered.get(old) === markup) { return; }
          if (old && depth > 0 && follow.same(old, n)) {
            follow.adopt(old, n, depth - 1);
            follow.rendered.set(old, markup);
            return;
          }
          var node = document.importNode(n, true);
          follow.sign(node, depth);
          if (old) { into.replaceChild(node, old); } else { into.appendChild(node); }
        });
        olds.slice(fresh.childNodes.length).forEach(function (n) { n.remove(); });
      },
      /** A new render of `session` patched in: at the bottom, the page stays there; the focus,
       *  if what held it was replaced, goes to the session. */
      update: function (session, html) {
        var root = document.scrollingElement || document.documentElement;
        var bottom = root.scrollHeight - root.scrollTop - window.innerHeight < 120;
        var article = $("team-session");
        var focused = article.contains(document.activeElement);
        follow.adopt(session.box, follow.parts(html), follow.DEPTH);
        if (focused && !article.contains(document.activeElement)) { article.focus({ preventScroll: true }); }
        if (bottom) { window.scrollTo(0, root.scrollHeight); }
      }
    };

    document.addEventListener("visibilitychange", follow.resume);

    $("live-tab").addEventListener("click", function () { team.show(false); });
    $("team-tab").addEventListener("click", function () { team.show(true); });
    $("team-usage").addEventListener("click", function () { team.usage(); });
    $("team-filters").addEventListener("submit", function (e) {
      e.preventDefault();
      team.filters = team.query();
      team.page = 0;
      team.load();
    });
    $("team-filters").addEventListener("reset", function () {
      team.filters = "";
      team.page = 0;
      setTimeout(team.load, 0);
    });
    $("team-search").addEventListener("submit", function (e) {
      e.preventDefault();
      var text = $("team-q").value.trim();
      if (text) { team.search(text); } else { team.load(); }
    });
    $("team-newer").addEventListener("click", function () { if (team.page > 0) { team.page -= 1; team.load(); } });
    $("team-older").addEventListener("click", function () { if (team.page + 1 < team.pages) { team.page += 1; team.load(); } });

    return team;
  };
})();
