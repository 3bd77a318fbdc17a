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
          if (r.status === 401) { signIn(true); throw new Error("the token was refused"); }
          if (!r.ok) {
            return r.text().then(function (t) { throw new Error(t.trim() || ("HTTP " + r.status)); });
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
        if (on) { team.load(); }
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
        var article = $("team-session");
        article.textContent = "";
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
            var chart = team.chart(charts[key]);
            if (chart) { part.appendChild(chart); }
            var details = el("details", "usage-numbers");
            details.appendChild(el("summary", "", "The numbers: " + heading.toLowerCase()));
            details.appendChild(table);
            part.appendChild(details);
            if (link) { part.appendChild(el("p")).appendChild(link); }
            article.appendChild(part);
          };
          [["agent", "Tokens per agent and day"], ["host", "Tokens per host and day"]].forEach(function (group) {
            var table = team.table("usage-" + group[0], ["day", group[0], "sessions", "turns", "input tokens", "output tokens"],
              daily.filter(function (d) { return d.by === group[0]; }), function (d) {
                return [str(d.day), str(d.name), num(d.sessions), num(d.turns), num(d.input_tokens), num(d.output_tokens)];
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
          section("activity", "Sessions and turns per day", team.table("usage-activity", ["day", "sessions", "turns"],
            list(answer.activity), function (a) { return [str(a.day), num(a.sessions), num(a.turns)]; }));
          section("costliest", "The sessions that cost most", team.table("usage-costliest",
            ["session", "title", "agent", "turns", "input tokens", "output tokens"], list(answer.costliest), function (c) {
              return [str(c.session), str(c.title), str(c.agent), num(c.turns), num(c.input_tokens), num(c.output_tokens)];
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
       *  the `text` searched for. */
      open: function (id, turn, text) {
        var article = $("team-session");
        article.textContent = "";
        article.appendChild(el("p", "empty", "reading the session…"));
        team.get("/team/session?id=" + encodeURIComponent(id)).then(function (r) { return r.text(); }).then(function (html) {
          // The export's head (its stylesheet, which the page's already holds, and its policy)
          // left out: its body starts at the first "<body", which no escaped text can hold.
          var body = html.indexOf("<body");
          var doc = new DOMParser().parseFromString(body < 0 ? "" : html.slice(body), "text/html");
          article.textContent = "";
          article.setAttribute("data-session", id);
          article.appendChild(team.shareForm(id));
          ["body > header", "body > main"].forEach(function (sel) {
            var part = doc.querySelector(sel);
            if (!part) { return; }
            part.querySelectorAll("script, nav").forEach(function (n) { n.remove(); });
            part.querySelectorAll("[id]").forEach(function (n) { n.id = "export-" + n.id; });
            part.querySelectorAll("a[href^='#']").forEach(function (a) { a.setAttribute("href", "#export-" + a.getAttribute("href").slice(1)); });
            article.appendChild(document.importNode(part, true));
          });
          var turns = article.querySelectorAll("section.turn");
          var hit = turn > 0 ? turns[turn - 1] : null;
          if (hit) {
            hit.classList.add("hit");
            if (text) { team.mark(hit, text); }
            hit.scrollIntoView({ block: "start" });
          } else {
            article.focus();
          }
        }, function (error) {
          article.textContent = "";
          article.appendChild(el("p", "error", error.message));
        });
      }
    };

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
