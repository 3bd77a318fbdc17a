// Drives the team view of `acp-journal serve --store`'s page in Debian's headless chromium with
// puppeteer-core (pinned by scripts/install-chromium.sh, run from beside it in <peers>/browser/).
// Our own test driver (tests/it/team_page.rs runs it); it waits for what a person would see and
// reports it, the Rust test asserts:
//   team_driver.mjs --url http://HOST:PORT --token T --rows N --host HOST --search TEXT --shots DIR
// list: signed in by `/#token=`, the Team button, the store's N sessions listed.
// filter: `--host` typed into the host filter: the rows left.
// state: for each of `--states` (comma-separated), the filters cleared, then with the keyboard
//   alone: Tab from the directory field to the state filter, the state typed (the select takes
//   the option it starts), Tab to Filter and Enter: where the focus was, the value, the rows.
// search: `--search` typed into the search box: the messages found; the first opened (the
//   session the server rendered, its turn marked and the text in it); whether any markup of
//   it ran as script.
// usage: the Usage button: the summary line; each table's rows (cells as shown); each table's
//   CSV link (its address, its file name) fetched as its click fetches it (with the token):
//   status, Content-Type, Content-Disposition, body; and without the token: status; each chart
//   the server drew (tokens per agent and per host, activity, costliest sessions, stop
//   reasons): its label, its bars' titles, the sessions it links to, its text; the cost tables
//   per agent and per host (rows), and their charts (one per currency: label, bars' titles).
// usage-keyboard: with Tab and Enter alone from the usage, the first chart's numbers shown
//   (its details opened), then the first of the costliest sessions' bars followed: opened.
// keyboard: the page reloaded; with Tab and Enter only, the Team button, then the first
//   session of the list, opened.
// refused: a fetch of /team/sessions from the page without the token, and with a wrong one.
// With --share SESSION (and --second URL, another host serving the store, --other SESSION),
// the share steps instead:
// share: signed in, the Team button, SESSION's row opened; with Tab and Enter only, its Share
//   button pressed: the link made, and where the focus is.
// view: the link opened in a fresh browser context (no token anywhere): status, headers, what
//   is on the page (its banner, and whether it comes first), every request it made; a
//   screenshot shared-session.png.
// second: the same link on the second host. another: the link with ?id=OTHER, and with
//   /OTHER after it: status, and whether OTHER's text is there.
// With --follow SESSION --markers A,B,… (SESSION live on another host: the test prompts it
// while the page looks), the follow steps instead, each emitted as soon as it is seen:
// opened: signed in, the Team button, SESSION's row opened: followed (data-follow="on"), its
//   turns; with the keyboard alone, Tab from the session to its wire view's summary and Enter
//   (opened), and the window scrolled to the bottom.
// shown: for each marker in turn, once an agent's words in the session hold it: when (the
//   page's clock, ms since the epoch, as a MutationObserver saw it), whether the window is at
//   the bottom, how far down, whether the focus and the wire view stayed, the turns. After the
//   second, the window is scrolled to the top (the next ones must not move it).
// ended: once the page stops following (the session closed on its host): the note it shows.
// quiet: the requests to /team/session in the 3 s after that (none are made).
// One JSON object per line on stdout, {"step": …, …}; on a failure {"step":"error",…}, a
// screenshot error.png in DIR, and exit 1. Screenshots are PNG files in DIR, named in the steps.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";

const argv = process.argv.slice(2);
const opts = {};
for (let i = 0; i < argv.length; i += 2) {
  const name = argv[i].replace(/^--/, "");
  if (argv[i + 1] === undefined) throw new Error(`${argv[i]} needs a value`);
  opts[name] = argv[i + 1];
}
const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const base = opts.url.replace(/\/+$/, "");
fs.mkdirSync(opts.shots, { recursive: true });

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "acp-journal-team-"));
const browser = await puppeteer.launch({
  executablePath: process.env.ACP_JOURNAL_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  userDataDir: profile,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const page = await browser.newPage();
page.setDefaultTimeout(60_000);
await page.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
const problems = [];
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("console", (m) => {
  // The refused fetches below log their 401s; nothing else may.
  if (m.type() === "error" && !m.text().includes("401")) problems.push(`console: ${m.text()}`);
});
const rows = (sel) => page.$$eval(sel, (rs) => rs.map((r) => r.getAttribute("data-session")));

// Tab until `selector` has the focus (at most `most` presses), then Enter.
const reach = async (selector, most) => {
  for (let i = 0; i < most; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) {
      await page.keyboard.press("Enter");
      return i + 1;
    }
  }
  throw new Error(`${selector} not reached in ${most} presses of Tab`);
};

/** The share steps (see the top). */
async function share() {
  step = "share";
  await page.goto(`${base}/#token=${encodeURIComponent(opts.token)}`);
  await page.waitForSelector("#team-tab:not([hidden])");
  await page.click("#team-tab");
  const row = `#team-list .team-row[data-session="${opts.share}"]`;
  await page.waitForSelector(row);
  await page.click(row);
  await page.waitForFunction(
    (id) => document.getElementById("team-session").getAttribute("data-session") === id
      && document.querySelector("#team-session .team-share .share-make"),
    {},
    opts.share,
  );
  await page.focus("#team-session");
  const toShare = await reach("#team-session .share-make", 10);
  await page.waitForSelector("#team-session .share-link");
  const link = await page.$eval("#team-session .share-link", (i) => i.value);
  const shareShot = path.join(opts.shots, "share-made.png");
  await page.screenshot({ path: shareShot });
  emit({
    step,
    toShare,
    link,
    focused: await page.evaluate(() => document.activeElement?.className ?? ""),
    note: await page.$eval("#team-session .share-out", (e) => e.innerText),
    screenshot: shareShot,
    problems,
  });

  step = "view";
  const context = await browser.createBrowserContext();
  const viewer = await context.newPage();
  await viewer.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
  const requests = [];
  const viewerProblems = [];
  viewer.on("request", (r) => requests.push(r.url()));
  viewer.on("pageerror", (e) => viewerProblems.push(`page error: ${e.message}`));
  viewer.on("console", (m) => { if (m.type() === "error") viewerProblems.push(`console: ${m.text()}`); });
  const shown = await viewer.goto(link);
  const viewShot = path.join(opts.shots, "shared-session.png");
  await viewer.screenshot({ path: viewShot });
  emit({
    step,
    status: shown.status(),
    referrer: shown.headers()["referrer-policy"],
    h1: await viewer.$eval("h1", (h) => h.innerText),
    banner: await viewer.$eval("aside.shared-banner", (a) => a.innerText),
    bannerFirst: await viewer.evaluate(() => document.body.firstElementChild?.matches("aside.shared-banner") ?? false),
    text: await viewer.$eval("body", (b) => b.innerText),
    turns: await viewer.$$eval("section.turn", (ts) => ts.length),
    pageParts: await viewer.$$eval("#team-list, #team-search, #sign-in, #session-list, .team-row, form", (es) => es.length),
    storage: await viewer.evaluate(() => sessionStorage.length + localStorage.length + document.cookie.length),
    requests,
    problems: viewerProblems,
    screenshot: viewShot,
  });

  step = "second";
  const secret = new URL(link).pathname;
  const second = await viewer.goto(opts.second.replace(/\/+$/, "") + secret);
  emit({ step, status: second.status(), h1: await viewer.$eval("h1", (h) => h.innerText) });

  step = "another";
  const statuses = [];
  let leaked = false;
  for (const wrong of [`${link}?id=${encodeURIComponent(opts.other)}`, `${link}/${encodeURIComponent(opts.other)}`]) {
    const got = await viewer.goto(wrong);
    statuses.push(got.status());
    leaked ||= (await viewer.$eval("body", (b) => b.innerText)).includes(opts.other);
  }
  emit({ step, statuses, leaked, h1: await viewer.$eval("h1", (h) => h.innerText) });
  await context.close();
}

/** The follow steps (see the top). */
async function follow() {
  step = "opened";
  const markers = opts.markers.split(",");
  await page.setViewport({ width: 1280, height: 500, deviceScaleFactor: 1 });
  await page.goto(`${base}/#token=${encodeURIComponent(opts.token)}`);
  await page.waitForSelector("#team-tab:not([hidden])");
  await page.click("#team-tab");
  const row = `#team-list .team-row[data-session="${opts.follow}"]`;
  await page.waitForSelector(row);
  // When each marker is first in an agent's words of the session, by the page's clock.
  await page.evaluate((markers) => {
    window.__seen = {};
    const article = document.getElementById("team-session");
    const look = () => {
      for (const m of markers) {
        if (window.__seen[m]) continue;
        for (const words of article.querySelectorAll("section.turn .agent")) {
          if (words.textContent.includes(m)) {
            window.__seen[m] = performance.timeOrigin + performance.now();
            break;
          }
        }
      }
    };
    new MutationObserver(look).observe(article, { childList: true, subtree: true, characterData: true });
  }, markers);
  await page.click(row);
  await page.waitForFunction(
    (id) => {
      const article = document.getElementById("team-session");
      return article.getAttribute("data-session") === id && article.getAttribute("data-follow") === "on";
    },
    {},
    opts.follow,
  );
  const asks = [];
  page.on("request", (r) => { if (r.url().includes("/team/session?")) asks.push(Date.now()); });
  // With the keyboard: from the session to its wire view's summary, opened.
  await page.focus("#team-session");
  const wire = "#team-session details.wire > summary";
  let toWire = 0;
  for (; toWire < 30; toWire++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, wire)) break;
  }
  await page.keyboard.press("Enter");
  const state = () => page.evaluate((wire) => {
    const root = document.scrollingElement || document.documentElement;
    const article = document.getElementById("team-session");
    return {
      bottom: root.scrollHeight - root.scrollTop - window.innerHeight < 2,
      scrollY: Math.round(window.scrollY),
      height: root.scrollHeight,
      focused: document.activeElement?.matches(wire) ?? false,
      wireOpen: article.querySelector("details.wire")?.open ?? false,
      turns: article.querySelectorAll("section.turn").length,
      follow: article.getAttribute("data-follow"),
      note: article.querySelector(".team-follow")?.textContent ?? "",
      ids: [...article.querySelectorAll("[id]")].map((e) => e.id).filter((id) => !id.startsWith("export-")),
    };
  }, wire);
  await page.evaluate(() => window.scrollTo(0, (document.scrollingElement || document.documentElement).scrollHeight));
  emit({ step, toWire: toWire + 1, ...(await state()) });

  step = "shown";
  for (const [i, marker] of markers.entries()) {
    await page.waitForFunction((m) => window.__seen[m], { timeout: 60_000 }, marker);
    const at = await page.evaluate((m) => window.__seen[m], marker);
    const seen = await state();
    if (i === 1) {
      await page.evaluate(() => window.scrollTo(0, 0));
    }
    emit({ step, marker, at, ...seen });
  }
  const shot = path.join(opts.shots, "team-follow.png");
  await page.screenshot({ path: shot });

  step = "ended";
  await page.waitForFunction(
    () => document.getElementById("team-session").getAttribute("data-follow") === "off",
    { timeout: 60_000 },
  );
  emit({ step, ...(await state()), screenshot: shot, problems });

  step = "quiet";
  const before = asks.length;
  await new Promise((done) => setTimeout(done, 3000));
  emit({ step, asks: asks.length - before, asked: asks.length });
}

let step = "start";
try {
  if (opts.follow) {
    await follow();
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(0);
  }
  if (opts.share) {
    await share();
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(0);
  }
  step = "list";
  await page.goto(`${base}/#token=${encodeURIComponent(opts.token)}`);
  await page.waitForSelector("#team-tab:not([hidden])");
  await page.click("#team-tab");
  await page.waitForFunction(
    (n) => document.querySelectorAll("#team-list .team-row").length === n,
    {},
    Number(opts.rows),
  );
  const listShot = path.join(opts.shots, "team-list.png");
  await page.screenshot({ path: listShot, fullPage: true });
  emit({
    step,
    rows: await rows("#team-list .team-row"),
    text: await page.$eval("#team-list", (e) => e.innerText),
    status: await page.$eval("#team-status", (e) => e.textContent),
    screenshot: listShot,
  });

  step = "filter";
  await page.type("#f-host", opts.host);
  await page.click("#team-filters button[type=submit]");
  await page.waitForFunction(() => document.getElementById("team-status").textContent.includes("match the filters"));
  emit({ step, rows: await rows("#team-list .team-row") });

  step = "state";
  const byState = {};
  for (const state of opts.states.split(",")) {
    await page.click("#f-clear");
    await page.waitForFunction(() => document.getElementById("team-status").textContent.includes("in the store"));
    await page.focus("#f-cwd");
    await page.keyboard.press("Tab");
    const focused = await page.evaluate(() => document.activeElement?.id);
    await page.keyboard.type(state);
    const toFilter = await reach("#team-filters button[type=submit]", 12);
    await page.waitForFunction(() => document.getElementById("team-status").textContent.includes("match the filters"));
    byState[state] = {
      focused,
      toFilter,
      value: await page.$eval("#f-state", (s) => s.value),
      rows: await rows("#team-list .team-row"),
      status: await page.$eval("#team-status", (e) => e.textContent),
    };
  }
  emit({ step, byState });

  step = "search";
  await page.type("#team-q", opts.search);
  await page.click("#team-search button[type=submit]");
  await page.waitForSelector("#team-found:not([hidden]) .team-hit");
  const hits = await page.$$eval("#team-found .team-hit", (hs) =>
    hs.map((h) => ({ session: h.getAttribute("data-session"), turn: h.getAttribute("data-turn"), text: h.innerText })));
  await page.click("#team-found .team-hit");
  await page.waitForSelector("#team-session section.turn.hit");
  const openShot = path.join(opts.shots, "team-session.png");
  await page.screenshot({ path: openShot });
  emit({
    step,
    hits,
    opened: await page.$eval("#team-session", (e) => e.getAttribute("data-session")),
    turns: await page.$$eval("#team-session section.turn", (ts) => ts.length),
    hit: await page.$eval("#team-session section.turn.hit", (t) => t.innerText),
    marks: await page.$$eval("#team-session mark.found", (ms) => ms.map((m) => m.textContent)),
    marksOutside: await page.$$eval("#team-session mark.found", (ms) => ms.filter((m) => !m.closest("section.turn.hit")).length),
    header: await page.$eval("#team-session header", (h) => h.innerText),
    scripts: await page.$$eval("#team-session script", (s) => s.length),
    images: await page.$$eval("#team-session img", (s) => s.length),
    pwned: await page.evaluate(() => window.__pwned === 1),
    ids: await page.$$eval("#team-session [id]", (es) => es.map((e) => e.id)),
    liveTimeline: await page.$$eval("#timeline", (es) => es.length),
    screenshot: openShot,
    problems,
  });

  step = "usage";
  await page.click("#team-usage");
  await page.waitForSelector("#team-session .usage-summary");
  const usageShot = path.join(opts.shots, "team-usage.png");
  await page.screenshot({ path: usageShot, fullPage: true });
  emit({
    step,
    summary: await page.$eval("#team-session .usage-summary", (e) => e.textContent),
    tables: await page.evaluate(async () => {
      const out = {};
      for (const by of ["agent", "host"]) {
        const link = document.querySelector(`#team-session a.usage-csv-${by}`);
        const href = link.getAttribute("href");
        const token = sessionStorage.getItem("acp-journal.token") || "";
        const got = await fetch(href, { headers: { Authorization: "Bearer " + token }, cache: "no-store" });
        const bare = await fetch(href, { cache: "no-store" });
        out[by] = {
          rows: [...document.querySelectorAll(`#team-session .usage-${by} tbody tr`)]
            .map((tr) => [...tr.cells].map((c) => c.textContent)),
          href,
          download: link.getAttribute("download"),
          status: got.status,
          type: got.headers.get("content-type"),
          disposition: got.headers.get("content-disposition"),
          csv: await got.text(),
          withoutToken: bare.status,
        };
      }
      return out;
    }),
    costTables: await page.evaluate(() => {
      const out = {};
      for (const by of ["agent", "host"]) {
        out[by] = [...document.querySelectorAll(`#team-session .usage-cost-${by} tbody tr`)]
          .map((tr) => [...tr.cells].map((c) => c.textContent));
      }
      return out;
    }),
    costCharts: await page.evaluate(() => {
      const out = {};
      for (const by of ["agent", "host"]) {
        out[by] = [...document.querySelectorAll(`#team-session .usage-part-cost-${by} > svg.chart`)].map((svg) => ({
          label: svg.getAttribute("aria-label"),
          titles: [...svg.querySelectorAll("rect.chart-bar > title")].map((t) => t.textContent),
        }));
      }
      return out;
    }),
    charts: await page.evaluate(() => {
      const out = {};
      for (const key of ["agent", "host", "activity", "costliest", "stops"]) {
        const svg = document.querySelector(`#team-session .usage-part-${key} > svg.chart`);
        out[key] = svg && {
          label: svg.getAttribute("aria-label"),
          titles: [...svg.querySelectorAll("rect.chart-bar > title, a > title, g > title")].map((t) => t.textContent),
          links: [...svg.querySelectorAll("a[data-session]")].map((a) => a.getAttribute("data-session")),
          text: svg.textContent,
        };
      }
      return out;
    }),
    screenshot: usageShot,
    problems,
  });

  step = "usage-keyboard";
  // With Tab and Enter alone: the first chart's numbers shown, then the costliest session opened.
  await page.focus("#team-session");
  const toNumbers = await reach("#team-session .usage-part-agent details > summary", 10);
  const numbersOpen = await page.$eval("#team-session .usage-part-agent details", (d) => d.open);
  const costliest = await page.$eval("#team-session .usage-part-costliest a.chart-link", (a) => a.getAttribute("data-session"));
  const toCostliest = await reach("#team-session .usage-part-costliest a.chart-link", 20);
  await page.waitForFunction(
    (id) => document.getElementById("team-session").getAttribute("data-session") === id
      && document.querySelector("#team-session section.turn"),
    {},
    costliest,
  );
  emit({ step, toNumbers, numbersOpen, toCostliest, costliest,
    opened: await page.$eval("#team-session", (e) => e.getAttribute("data-session")) });

  step = "keyboard";
  await page.goto(`${base}/`);
  await page.waitForSelector("#team-tab:not([hidden])");
  const toTeam = await reach("#team-tab", 30);
  await page.waitForSelector("#team-list .team-row");
  const first = await page.$eval("#team-list .team-row", (r) => r.getAttribute("data-session"));
  const toRow = await reach("#team-list .team-row", 60);
  await page.waitForFunction(
    (id) => document.getElementById("team-session").getAttribute("data-session") === id,
    {},
    first,
  );
  emit({
    step,
    toTeam,
    toRow,
    first,
    opened: await page.$eval("#team-session", (e) => e.getAttribute("data-session")),
    focused: await page.evaluate(() => document.activeElement?.id),
  });

  step = "refused";
  const statuses = await page.evaluate(async () => {
    const none = await fetch("/team/sessions", { cache: "no-store" });
    const wrong = await fetch("/team/sessions", {
      cache: "no-store",
      headers: { Authorization: "Bearer not-the-token-at-all" },
    });
    return [none.status, wrong.status, await none.text()];
  });
  emit({ step, statuses });
} catch (error) {
  const shot = path.join(opts.shots, "team-error.png");
  await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
  emit({
    step: "error",
    at: step,
    message: String(error?.message ?? error),
    problems,
    html: await page.content().catch(() => ""),
    screenshot: shot,
  });
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
await browser.close();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(0);
