// The page bench's measurement (run by `cargo bench --bench page` from beside the puppeteer-core
// that scripts/install-chromium.sh pins in <peers>/browser/): how long an update takes from the
// agent to each client attached to one session of `acp-journal serve`.
//   delay.mjs --bin ACP_JOURNAL --agent PY --n N --pace MS --ws <peers>/node-v2/node_modules/ws
// The agent (benches/page/pacing_agent.py) stamps each update with the wall clock when it
// writes it; A (a WebSocket client, which prompts), B (a WebSocket client that joined the
// session by session/load) and the page in headless chromium (which joined by session/attach)
// note when each update arrives: for the page, when its text is in the DOM (a MutationObserver,
// performance.timeOrigin + performance.now()). One JSON object on stdout.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const argv = process.argv.slice(2);
const opts = {};
for (let i = 0; i < argv.length; i += 2) opts[argv[i].replace(/^--/, "")] = argv[i + 1];
const n = Number(opts.n);
const { default: WebSocket } = await import(pathToFileURL(path.join(opts.ws, "wrapper.mjs")));
const nowUs = () => (performance.timeOrigin + performance.now()) * 1000;
const token = "bench-" + Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
const store = fs.mkdtempSync(path.join(os.tmpdir(), "acp-journal-page-bench-"));

const serve = spawn(opts.bin, ["--journal-dir", store, "serve", "--listen", "127.0.0.1:0", "--",
  "python3", opts.agent, String(n), opts.pace], {
  env: { ...process.env, ACP_JOURNAL_TOKEN: token, ACP_JOURNAL_LOG: "info" },
  stdio: ["ignore", "ignore", "pipe"],
});
const url = await new Promise((resolve, reject) => {
  let text = "";
  serve.stderr.on("data", (d) => {
    text += d;
    const m = text.match(/serving ACP at (\S+)/);
    if (m) resolve(m[1]);
  });
  serve.on("exit", (code) => reject(new Error(`serve exited ${code}: ${text}`)));
});
const base = url.replace(/\/acp$/, "");


/** A WebSocket ACP client noting when each stamped update arrives. */
function client() {
  const ws = new WebSocket(url.replace("http://", "ws://"), { headers: { Authorization: `Bearer ${token}` } });
  const waiting = new Map();
  const arrived = [];
  let id = 0;
  ws.on("message", (data) => {
    const at = nowUs();
    const msg = JSON.parse(data.toString());
    if (msg.method === "session/update") {
      const m = /t=(\d+) i=(\d+)/.exec(msg.params?.update?.content?.text ?? "");
      if (m) arrived.push([Number(m[2]), at - Number(m[1])]);
    } else if (msg.id !== undefined && waiting.has(msg.id)) {
      waiting.get(msg.id)(msg);
      waiting.delete(msg.id);
    } else if (msg.id !== undefined && msg.method) {
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "no" } }));
    }
  });
  const call = (method, params) => new Promise((resolve) => {
    const mine = ++id;
    waiting.set(mine, resolve);
    ws.send(JSON.stringify({ jsonrpc: "2.0", id: mine, method, params }));
  });
  const open = new Promise((resolve) => ws.on("open", resolve));
  return { ws, call, open, arrived };
}

const init = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "bench", version: "0" } };
const a = client();
await a.open;
await a.call("initialize", init);
const sessionId = (await a.call("session/new", { cwd: "/tmp", mcpServers: [] })).result.sessionId;
// The session must have a prompt to be listed: a first, short turn (not measured).
await a.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "warm up" }] });
a.arrived.length = 0;


const b = client();
await b.open;
await b.call("initialize", init);
await b.call("session/load", { sessionId, cwd: "/tmp", mcpServers: [] });
b.arrived.length = 0;


const profile = fs.mkdtempSync(path.join(os.tmpdir(), "acp-journal-page-bench-profile-"));
const browser = await puppeteer.launch({
  executablePath: process.env.ACP_JOURNAL_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  userDataDir: profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage();
page.setDefaultTimeout(120_000);
await page.setViewport({ width: 1280, height: 900 });
await page.goto(`${base}/#token=${encodeURIComponent(token)}`);
await page.click(`.session-row[data-session="${sessionId}"]`);
await page.waitForFunction(() => document.getElementById("timeline").innerText.includes("warm up"));
// Notes the arrival of each stamped line in the transcript's text.
await page.evaluate(() => {
  window.__arrived = [];
  const seen = new Set();
  const scan = (text) => {
    const at = (performance.timeOrigin + performance.now()) * 1000;
    for (const m of text.matchAll(/t=(\d+) i=(\d+)/g)) {
      if (seen.has(m[2])) continue;
      seen.add(m[2]);
      window.__arrived.push([Number(m[2]), at - Number(m[1])]);
    }
  };
  const done = new WeakMap();
  new MutationObserver((records) => {
    for (const r of records) {
      const node = r.type === "characterData" ? r.target : null;
      const targets = node ? [node] : [...r.addedNodes];
      for (const t of targets) {
        // Only what is new in a text node (reading the whole of a long one each time would
        // make the measurement, not the page, slow).
        if (t.nodeType === Node.TEXT_NODE) {
          const from = Math.max(0, (done.get(t) ?? 0) - 40);
          scan(t.substringData(from, t.length - from));
          done.set(t, t.length);
        } else {
          scan(t.textContent ?? "");
        }
      }
    }
  }).observe(document.getElementById("timeline"), { childList: true, characterData: true, subtree: true });
});


const t0 = nowUs();
const answer = await a.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "go" }] });
const elapsed = (nowUs() - t0) / 1e6;
await page.waitForFunction((n) => window.__arrived.length >= n, {}, n);
const pageArrived = await page.evaluate(() => window.__arrived);
await browser.close();
fs.rmSync(profile, { recursive: true, force: true });
const deadline = Date.now() + 10_000;
while (b.arrived.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
a.ws.close();
b.ws.close();
serve.kill("SIGTERM");
await new Promise((r) => serve.on("exit", r));
fs.rmSync(store, { recursive: true, force: true });

const stats = (arrived) => {
  const d = arrived.map(([, us]) => us).sort((x, y) => x - y);
  const at = (q) => d[Math.min(d.length - 1, Math.floor(q * d.length))];
  return { count: d.length, p50_us: at(0.5), p99_us: at(0.99), max_us: d[d.length - 1] };
};
process.stdout.write(JSON.stringify({
  n, pace_ms: Number(opts.pace), stop: answer.result?.stopReason, seconds: elapsed,
  a: stats(a.arrived), b: stats(b.arrived), page: stats(pageArrived),
}) + "\n");
process.exit(0);
