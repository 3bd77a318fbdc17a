// The team page at team scale (`cargo bench --bench fleet`, section `page`; run from beside the
// puppeteer-core that scripts/install-chromium.sh pins in <peers>/browser/):
//   team_page.mjs --url http://HOST:PORT --token T --word WORD
// In Debian's headless chromium with a new profile, two rounds, "cold" then "warm" (the same
// browser, the page loaded again), each of three steps:
// list: navigation to the page (`/#token=`); the Team button clicked the moment it shows (by a
//   MutationObserver in the page, as a person who waits for it); until the list's first rows
//   are painted. ms: from navigation (performance.timeOrigin) to the frame after the rows were
//   in the DOM (requestAnimationFrame, then a task: the paint); tab_ms: when the button showed.
// search: WORD put in the search box and submitted; until its results are painted.
// usage: the Usage button; until its first chart (the server's SVG) is painted.
// answer_ms: the page's request of that step (/team/sessions, /team/search, /team/usage), from
// its start to its response's end (Resource Timing): the host's reading of the store.
// Before each step it says {"ready": "ROUND:STEP"} and after it {"step", "round", …}, one JSON
// object a line on stdout, and waits for a line on stdin after each (the bench counts the
// store's requests in between). On a failure {"step":"error",…} and exit 1.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import puppeteer from "puppeteer-core";

const argv = process.argv.slice(2);
const opts = {};
for (let i = 0; i < argv.length; i += 2) opts[argv[i].replace(/^--/, "")] = argv[i + 1];
const base = opts.url.replace(/\/+$/, "");
const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
/** Says `event` and waits for the bench to have counted. */
const say = async (event) => {
  process.stdout.write(JSON.stringify(event) + "\n");
  if ((await input.next()).done) process.exit(1);
};

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "acp-journal-team-bench-"));
const browser = await puppeteer.launch({
  executablePath: process.env.ACP_JOURNAL_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  userDataDir: profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage();
page.setDefaultTimeout(600_000);
await page.setViewport({ width: 1280, height: 900, deviceScaleFactor: 1 });
const problems = [];
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));

// In every document, before its scripts: when each thing first shows, and when it is painted.
await page.evaluateOnNewDocument(() => {
  const t = (window.__t = {});
  const mark = (key, shown) => {
    if (t[key] || !shown) return;
    t[key] = { seen: performance.now() };
    requestAnimationFrame(() => setTimeout(() => { t[key].painted = performance.now(); }, 0));
  };
  new MutationObserver(() => {
    const tab = document.getElementById("team-tab");
    if (tab && !tab.hidden && !t.tab) {
      t.tab = { seen: performance.now() };
      tab.click();
    }
    mark("rows", document.querySelector("#team-list:not([hidden]) .team-row"));
    mark("hits", document.querySelector("#team-found:not([hidden]) .team-hit"));
    mark("chart", document.querySelector("#team-session svg.chart"));
  }).observe(document, { childList: true, subtree: true, attributes: true, attributeFilter: ["hidden"] });
});

/** The last request to `path` the page made: start to response end, ms. */
const answered = (path) => page.evaluate((p) => {
  const entries = performance.getEntriesByType("resource").filter((e) => e.name.includes(p));
  const last = entries[entries.length - 1];
  return last ? last.responseEnd - last.startTime : null;
}, path);

const painted = (key) => page.waitForFunction((k) => window.__t[k]?.painted, { polling: 50 }, key);

/** Clicks `selector` in the page (after running `before`), noting when: ms to `key` painted. */
const ask = async (selector, key, before) => {
  await page.evaluate((s, k, b) => {
    window.__t[k] = undefined;
    if (b) document.getElementById(b.id).value = b.value;
    window.__t.asked = performance.now();
    document.querySelector(s).click();
  }, selector, key, before);
  await painted(key);
  return page.evaluate((k) => window.__t[k].painted - window.__t.asked, key);
};

async function round(name) {
  step = `${name}:list`;
  await page.goto("about:blank");
  await say({ ready: step });
  await page.goto(`${base}/#token=${encodeURIComponent(opts.token)}`);
  await painted("rows");
  await say({
    step: "list",
    round: name,
    ms: await page.evaluate(() => window.__t.rows.painted),
    tab_ms: await page.evaluate(() => window.__t.tab.seen),
    answer_ms: await answered("/team/sessions"),
    rows: await page.$$eval("#team-list .team-row", (rs) => rs.length),
    total: Number((await page.$eval("#team-status", (e) => e.textContent)).split(" ")[0]),
    problems,
  });

  step = `${name}:search`;
  await say({ ready: step });
  const searched = await ask("#team-search button[type=submit]", "hits", { id: "team-q", value: opts.word });
  await say({
    step: "search",
    round: name,
    ms: searched,
    answer_ms: await answered("/team/search"),
    hits: await page.$$eval("#team-found .team-hit", (hs) => hs.map((h) => h.getAttribute("data-session"))),
    status: await page.$eval("#team-status", (e) => e.textContent),
    problems,
  });

  step = `${name}:usage`;
  await say({ ready: step });
  const counted = await ask("#team-usage", "chart");
  await say({
    step: "usage",
    round: name,
    ms: counted,
    answer_ms: await answered("/team/usage"),
    charts: await page.$$eval("#team-session svg.chart", (cs) => cs.length),
    summary: await page.$eval("#team-session .usage-summary", (e) => e.textContent),
    problems,
  });
}

let step = "start";
try {
  await round("cold");
  await round("warm");
} catch (error) {
  process.stdout.write(JSON.stringify({
    step: "error", at: step, message: String(error?.message ?? error), problems,
  }) + "\n");
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
await browser.close();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(0);
