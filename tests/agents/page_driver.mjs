// Drives `acp-journal serve`'s page in Debian's headless chromium with puppeteer-core (pinned by
// scripts/install-chromium.sh, run from beside it in <peers>/browser/). Our own test driver
// (tests/it/page.rs runs it); it waits for what a person would see and reports it, the Rust
// test asserts:
//   page_driver.mjs --url http://HOST:PORT --token T --session ID --shots DIR
//                   --scenario converse|hostile|settle|shared|states|events|subagents
//                   --prompt TEXT
//                   [--expect TEXT]
//                   [--other TEXT]
// converse: the sign-in form without a token; a wrong `/?token=` (an old link: its redirect to
//   `/#token=`) refused and gone from the address; the token by `/#token=` and, in another tab,
//   by the form, kept in the tab's sessionStorage, no cookie; the session list;
//   the session opened (its history, `--expect` in it); `--prompt` sent from the page; the
//   permission request its turn raises, screenshot on a phone (390x844), answered (allow); the
//   turn's end, screenshot on a desktop (1280x900).
// hostile: signed in, the session opened, `--prompt` sent; the turn's end and what the
//   transcript holds (markup in agent output must be text).
// shared: as converse, but another client answers the permission request first (the card is
//   settled); with --other, the turn another client then prompts, followed to its end.
// settle (tests/agents/page_agent.py): signed in, the session opened; a prompt the host
//   refuses ("busy"), then one ("settle") whose permission request is taken back at once.
// states (tests/agents/page_agent.py): signed in, the session opened; a prompt ("modes") whose
//   turn changes the mode, then the page reloaded (the history again).
// events (tests/agents/page_agent.py): signed in, the session opened; a prompt ("events") whose
//   turn sends a notice, a compaction and a background task, then the page reloaded (the
//   history again: the compaction and the task replayed, as the page declared it draws them).
// subagents (tests/agents/page_agent.py): signed in, the session opened; a prompt ("subagent")
//   whose turn runs a subagent: its timeline drawn inside the turn, its permission request
//   answered from the keyboard (Tab from the subagent's title, Enter), its box folded and
//   unfolded by the keyboard; then the page reloaded (the history again: the tree replayed).
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
// (Not `isMobile`: changing it reloads the page.)
const PHONE = { width: 390, height: 844, deviceScaleFactor: 1 };
const DESKTOP = { width: 1280, height: 900, deviceScaleFactor: 1 };
fs.mkdirSync(opts.shots, { recursive: true });

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "acp-journal-page-"));
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
await page.setViewport(DESKTOP);
const problems = [];
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("console", (m) => {
  if (m.type() === "error") problems.push(`console: ${m.text()}`);
});

let step = "start";
try {
  // No token in this tab: the sign-in form, and nothing of any session.
  step = "sign-in-form";
  const first = await page.goto(`${base}/`);
  await page.waitForSelector("#sign-in:not([hidden])");
  emit({
    step,
    status: first.status(),
    layoutHidden: await page.$eval("#layout", (e) => e.hidden),
    html: await page.content(),
  });

  // A wrong token, by an old link: `/?token=` redirected into the fragment, taken out of the
  // address at once, refused by the WebSocket: the form again, with its error.
  step = "wrong-token";
  const wrong = await page.goto(`${base}/?token=${encodeURIComponent(opts.token + "x")}`);
  await page.waitForSelector("#sign-in-error:not([hidden])");
  emit({
    step,
    redirects: wrong.request().redirectChain().map((r) => ({
      status: r.response()?.status(), location: r.response()?.headers().location,
    })),
    url: page.url(),
    alert: await page.$eval("#sign-in-error", (e) => e.textContent),
    stored: await page.evaluate(() => sessionStorage.getItem("acp-journal.token")),
  });

  // The token in the fragment: never sent to the server, out of the address bar at once, kept
  // in this tab only; no cookie.
  step = "sign-in";
  await page.goto("about:blank");
  const signed = await page.goto(`${base}/#token=${encodeURIComponent(opts.token)}`);
  await page.waitForFunction(() => document.getElementById("connection").textContent === "connected");
  const cookies = await browser.cookies();
  emit({
    step,
    status: signed.status(),
    url: page.url(),
    documentCookie: await page.evaluate(() => document.cookie),
    cookies: cookies.length,
    stored: await page.evaluate((t) => sessionStorage.getItem("acp-journal.token") === t, opts.token),
    headers: signed.headers(),
  });

  // Another tab has no token: typed into the form, it signs in too.
  step = "form-sign-in";
  const tab = await browser.newPage();
  await tab.goto(`${base}/`);
  await tab.waitForSelector("#sign-in:not([hidden])");
  await tab.type("#token", opts.token);
  await tab.click("#sign-in-form button");
  await tab.waitForFunction(() => document.getElementById("connection").textContent === "connected");
  emit({ step, url: tab.url(), signInHidden: await tab.$eval("#sign-in", (e) => e.hidden) });
  await tab.close();

  step = "list";
  const row = `.session-row[data-session="${opts.session}"]`;
  await page.waitForSelector(row);
  emit({
    step,
    row: await page.$eval(row, (e) => e.innerText),
    rows: await page.$$eval(".session-row", (rs) => rs.length),
    connection: await page.$eval("#connection", (e) => e.textContent),
  });

  step = "open";
  await page.click(row);
  if (opts.expect) {
    await page.waitForFunction(
      (text) => document.getElementById("timeline").innerText.includes(text),
      {},
      opts.expect,
    );
  } else {
    await page.waitForSelector("#timeline section.turn");
  }
  emit({
    step,
    title: await page.$eval("#session-title", (e) => e.innerText),
    turns: await page.$$eval("#timeline section.turn", (s) => s.length),
    tools: await page.$$eval("#timeline details.tool", (t) => t.length),
    timeline: await page.$eval("#timeline", (e) => e.innerText),
  });

  if (opts.scenario === "settle") {
    // A prompt the host refuses: its message, the text kept, no turn left behind.
    step = "refused";
    const turns = () => page.$$eval("#timeline section.turn", (s) => s.length);
    const before = await turns();
    await page.type("#prompt-text", "busy");
    await page.click("#send");
    await page.waitForSelector("#prompt-error:not([hidden])");
    emit({
      step,
      error: await page.$eval("#prompt-error", (e) => e.textContent),
      kept: await page.$eval("#prompt-text", (e) => e.value),
      turnsBefore: before,
      turnsAfter: await turns(),
    });

    // A permission request another client answered: settled, answered -32800; the outcome on
    // the tool's card.
    step = "settled";
    await page.$eval("#prompt-text", (e) => { e.value = ""; });
    await page.type("#prompt-text", "settle");
    await page.click("#send");
    const turn = `#timeline section.turn:nth-of-type(${before + 1})`;
    await page.waitForSelector(`${turn} .turn-end`);
    const shot = path.join(opts.shots, "settle-desktop.png");
    await page.click("#expand-tools");
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await page.screenshot({ path: shot });
    emit({
      step,
      permission: await page.$eval(`${turn} .permission`, (e) => ({
        text: e.innerText,
        settled: e.getAttribute("data-settled"),
        buttons: e.querySelectorAll("button").length,
      })),
      agent: await page.$eval(`${turn} .agent`, (e) => e.textContent),
      tool: await page.$eval(`${turn} details.tool summary`, (e) => e.innerText),
      tools: await page.$$eval(`${turn} details.tool`, (ts) => ts.length),
      diff: await page.$$eval(`${turn} .diff pre span`, (ss) => ss.map((x) => [x.className, x.textContent])),
      plans: await page.$$eval(`${turn} .plan`, (ps) => ps.map((p) => [...p.querySelectorAll("li")].map((l) => [l.className, l.textContent]))),
      end: await page.$eval(`${turn} .turn-end`, (e) => e.textContent),
      screenshot: shot,
      problems,
    });
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(0);
  }

  if (opts.scenario === "states") {
    // A mode change live: drawn in its turn, where it came, and in the session's facts.
    step = "mode-live";
    const before = await page.$$eval("#timeline section.turn", (s) => s.length);
    await page.type("#prompt-text", "modes");
    await page.click("#send");
    const turn = `#timeline section.turn:nth-of-type(${before + 1})`;
    await page.waitForSelector(`${turn} .turn-end`);
    const shown = () => page.evaluate(() => ({
      turns: [...document.querySelectorAll("#timeline section.turn")].map((t) =>
        [...t.children].map((c) => `${c.className}: ${c.textContent}`)),
      between: [...document.querySelectorAll("#timeline > .meta")].map((m) => m.textContent),
      facts: document.getElementById("session-facts").innerText,
    }));
    emit({ step, ...(await shown()) });
    // The page again: the history, whose state the host gives collapsed after its last turn,
    // shows the mode in the facts and not in a turn it did not happen in.
    step = "mode-history";
    await page.reload();
    await page.waitForFunction(
      (n) => document.querySelectorAll("#timeline section.turn").length === n
        && /Planning now/.test(document.getElementById("timeline").innerText),
      {},
      before + 1,
    );
    await page.waitForFunction(() => /plan/.test(document.getElementById("session-facts").innerText));
    emit({ step, ...(await shown()), problems });
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(0);
  }

  if (opts.scenario === "events") {
    // A notice, a compaction with its summary, a background task: drawn live, as text.
    step = "events-live";
    const before = await page.$$eval("#timeline section.turn", (s) => s.length);
    await page.type("#prompt-text", "events");
    await page.click("#send");
    const turn = `#timeline section.turn:nth-of-type(${before + 1})`;
    await page.waitForSelector(`${turn} .turn-end`);
    const shown = (n) => page.evaluate((t) => {
      const section = document.querySelector(t);
      return {
        turn: [...section.children].map((c) => `${c.className}: ${c.textContent}`),
        markup: section.querySelectorAll("b, i, build").length,
      };
    }, `#timeline section.turn:nth-of-type(${n})`);
    const shot = path.join(opts.shots, "events-desktop.png");
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await page.screenshot({ path: shot });
    emit({ step, ...(await shown(before + 1)), screenshot: shot });
    // The page again: the history as the host replays it to what the page declared.
    step = "events-history";
    await page.reload();
    await page.waitForFunction(
      (n) => document.querySelectorAll("#timeline section.turn").length === n
        && /Done\./.test(document.getElementById("timeline").innerText),
      {},
      before + 1,
    );
    emit({ step, ...(await shown(before + 1)), problems });
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(0);
  }

  if (opts.scenario === "subagents") {
    await subagents();
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(0);
  }

  step = "prompt";
  const turnsBefore = await page.$$eval("#timeline section.turn", (s) => s.length);
  await page.type("#prompt-text", opts.prompt);
  await page.click("#send");
  const lastTurn = `#timeline section.turn:nth-of-type(${turnsBefore + 1})`;
  await page.waitForSelector(lastTurn);

  if (opts.scenario === "converse") {
    // An update arrives live, then the permission request the turn raises.
    step = "live-update";
    await page.waitForSelector(`${lastTurn} .agent`);
    emit({ step, agent: await page.$eval(`${lastTurn} .agent`, (e) => e.innerText) });

    step = "permission";
    await page.waitForSelector(`${lastTurn} .permission.asking button.option`);
    await page.setViewport(PHONE);
    await page.$eval(`${lastTurn} .permission.asking`, (e) => e.scrollIntoView({ block: "center" }));
    const layout = await page.evaluate(() => {
      const visible = [...document.querySelectorAll("button")].filter((b) => b.offsetParent !== null);
      return {
        viewport: window.innerWidth,
        scrollWidth: document.documentElement.scrollWidth,
        smallestButton: Math.min(...visible.map((b) => b.getBoundingClientRect().height)),
        smallButtons: visible
          .filter((b) => b.getBoundingClientRect().height < 40)
          .map((b) => b.textContent),
        sessionsBelowList: document.getElementById("session").getBoundingClientRect().top >=
          document.getElementById("sessions").getBoundingClientRect().bottom,
      };
    });
    // The narrowest phone the page is made for, too.
    await page.setViewport({ ...PHONE, width: 375 });
    layout.narrowScrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
    await page.setViewport(PHONE);
    await page.$eval(`${lastTurn} .permission.asking`, (e) => e.scrollIntoView({ block: "center" }));
    const phone = path.join(opts.shots, `${opts.scenario}-phone.png`);
    await page.screenshot({ path: phone });
    emit({
      step,
      card: await page.$eval(`${lastTurn} .permission.asking`, (e) => e.innerText),
      options: await page.$$eval(`${lastTurn} .permission.asking button.option`, (bs) =>
        bs.map((b) => ({ id: b.getAttribute("data-option"), text: b.textContent }))),
      layout,
      screenshot: phone,
    });

    step = "answer";
    await page.click(`${lastTurn} .permission button.option.allow`);
    await page.waitForSelector(`${lastTurn} .permission[data-answered]`);
    emit({ step, card: await page.$eval(`${lastTurn} .permission`, (e) => e.innerText) });
  }

  if (opts.scenario === "shared") {
    // Another client attached to the session answers the permission request first: the card
    // is settled here, without a click.
    step = "settled-elsewhere";
    await page.waitForSelector(`${lastTurn} .permission[data-settled]`);
    emit({
      step,
      card: await page.$eval(`${lastTurn} .permission`, (e) => ({
        text: e.innerText,
        settled: e.getAttribute("data-settled"),
        buttons: e.querySelectorAll("button").length,
      })),
    });
  }

  step = "turn-end";
  await page.waitForSelector(`${lastTurn} .turn-end`);
  await page.setViewport(DESKTOP);
  await page.evaluate(() => window.scrollTo(0, 0));
  const desktop = path.join(opts.shots, `${opts.scenario}-desktop.png`);
  await page.screenshot({ path: desktop });
  emit({
    step,
    end: await page.$eval(`${lastTurn} .turn-end`, (e) => e.innerText),
    turn: await page.$eval(lastTurn, (e) => e.innerText),
    tools: await page.$$eval(`${lastTurn} details.tool`, (ts) => ts.map((t) => ({
      id: t.getAttribute("data-tool"),
      status: t.querySelector(".status")?.textContent ?? null,
    }))),
    // Elements where only text belongs: any is agent markup that was not escaped.
    markup: await page.$$eval(
      "#timeline img, #timeline script, #timeline iframe, #timeline .user *, #timeline .agent *, " +
        "#session-list .s-title *, #session-title b, #session-title img",
      (es) => es.map((e) => e.outerHTML)),
    users: await page.$$eval("#timeline .user", (es) => es.map((e) => e.textContent)),
    agents: await page.$$eval("#timeline .agent", (es) => es.map((e) => e.textContent)),
    pwned: await page.evaluate(() => window.__pwned === 1 || !!document.querySelector("blink")),
    screenshot: desktop,
    problems,
  });

  if (opts.scenario === "shared" && opts.other) {
    // Another client prompts `--other` next (the test makes it): its turn, live, to its end.
    step = "other-turn";
    const other = await page.waitForFunction(
      (text) => [...document.querySelectorAll("#timeline section.turn")].find(
        (t) => t.querySelector(".user")?.textContent.includes(text) && t.querySelector(".turn-end")),
      {},
      opts.other,
    );
    emit({
      step,
      end: await other.evaluate((t) => t.querySelector(".turn-end").textContent),
      turn: await other.evaluate((t) => t.innerText),
      problems,
    });
  }

  /** The "subagents" scenario (steps subagent-live, subagent-keys, subagent-history). */
  async function subagents() {
    step = "subagent-live";
    const before = await page.$$eval("#timeline section.turn", (s) => s.length);
    await page.type("#prompt-text", "subagent");
    await page.click("#send");
    const turn = `#timeline section.turn:nth-of-type(${before + 1})`;
    const child = `${turn} details.child`;
    await page.waitForSelector(`${child} .permission.asking button.option.allow`);
    // From the subagent's title, Tab reaches its permission request's first option.
    await page.focus(`${child} > summary`);
    let tabs = 0;
    while (tabs < 20 && !(await page.evaluate(() => document.activeElement?.matches(".option.allow")))) {
      await page.keyboard.press("Tab");
      tabs += 1;
    }
    const focused = await page.evaluate(() => document.activeElement?.textContent ?? null);
    await page.keyboard.press("Enter");
    await page.waitForSelector(`${turn} .turn-end`);
    const shown = (t) => page.evaluate((sel) => {
      const section = document.querySelector(sel);
      const line = (c) => `${c.className}: ${c.matches("details.child") ? c.querySelector("summary").textContent : c.textContent}`;
      return {
        turn: [...section.children].map(line),
        children: [...section.querySelectorAll("details.child")].map((c) => ({
          session: c.getAttribute("data-session"),
          state: c.getAttribute("data-state"),
          depth: c.getAttribute("data-depth"),
          lines: [...c.children].map(line),
        })),
        markup: section.querySelectorAll("b:not(.permission > b), i").length,
      };
    }, t);
    await page.$eval(child, (e) => e.scrollIntoView({ block: "center" }));
    const shot = path.join(opts.shots, "subagents-desktop.png");
    await page.screenshot({ path: shot });
    emit({ step, ...(await shown(turn)), tabs, focused, screenshot: shot });

    // Its box folds and unfolds from the keyboard (its title is a <summary>).
    step = "subagent-keys";
    await page.focus(`${child} > summary`);
    await page.keyboard.press("Enter");
    const folded = await page.$eval(child, (e) => !e.open);
    await page.keyboard.press("Space");
    emit({ step, folded, unfolded: await page.$eval(child, (e) => e.open) });

    // The page again: the host replays the tree to a client that declared `subagents`.
    step = "subagent-history";
    await page.reload();
    await page.waitForFunction(
      (n) => document.querySelectorAll("#timeline section.turn").length === n
        && /The helper is done\./.test(document.getElementById("timeline").innerText),
      {},
      before + 1,
    );
    const again = path.join(opts.shots, "subagents-history.png");
    await page.$eval(child, (e) => e.scrollIntoView({ block: "center" }));
    await page.screenshot({ path: again });
    emit({ step, ...(await shown(turn)), screenshot: again, problems });
  }
} catch (error) {
  const shot = path.join(opts.shots, "error.png");
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
