// The TypeScript SDK 2.4.0's own remote server (`experimental/server`'s AcpServer with the
// `experimental/node` adapters and `ws`; pinned by scripts/install-peers.sh), serving a stdio ACP
// agent over Streamable HTTP and WebSocket: the baseline "the SDK's own server" for tests and
// benchmarks of `acp-journal serve`.
//   ts_sdk_server.mjs [--port P] [--host H] [--token T] -- AGENT [ARGS...]
// Listens on H:P (127.0.0.1, port 0 = any) at /acp only (404 elsewhere); with --token, a request
// or WebSocket upgrade without `Authorization: Bearer T` gets 401. Prints one JSON line on
// stdout once listening: {"event":"listening","port":P,"url":"http://H:P/acp"}; diagnostics on
// stderr. SIGTERM/SIGINT: closes every connection, ends the agents, exits 0.
//
// What it hosts: the SDK's server takes an `AgentConnector` (`connect(stream)` with a JSON-RPC
// message stream per accepted connection, connection.d.ts `AgentConnector`), not only an
// in-process Agent, so each remote connection (an HTTP `initialize` POST or a WebSocket upgrade)
// is bridged to ITS OWN agent subprocess started from the command after `--`, message for
// message (the SDK's ndJsonStream on the child's stdio). That is the SDK's model: connections
// share nothing, an agent process lives exactly as long as its connection (its stdin is closed
// when the connection ends: DELETE, socket close, limits), and a session can be
// loaded on another connection only if the agent keeps it outside its process (for instance
// `acp-journal --journal-dir D -- AGENT` as the agent, which serves session/load and
// session/list from its journal).
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { timingSafeEqual } from "node:crypto";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const command = sep >= 0 ? argv.slice(sep + 1) : [];
const opts = { port: 0, host: "127.0.0.1" };
const flags = sep >= 0 ? argv.slice(0, sep) : argv;
for (let i = 0; i < flags.length; i++) {
  const value = () => flags[++i];
  switch (flags[i]) {
    case "--port": opts.port = Number(value()); break;
    case "--host": opts.host = value(); break;
    case "--token": opts.token = value(); break;
    default:
      console.error(`ts_sdk_server: unknown option ${flags[i]}`);
      process.exit(2);
  }
}
if (command.length === 0) {
  console.error("usage: ts_sdk_server.mjs [--port P] [--host H] [--token T] -- AGENT [ARGS...]");
  process.exit(2);
}
const log = (...args) => console.error("[ts_sdk_server]", ...args);

// One agent subprocess per accepted connection.
const children = new Set();
let spawned = 0;
const stdioAgent = {
  connect(stream) {
    const n = ++spawned;
    const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
    children.add(child);
    const exited = new Promise((resolve) => {
      child.on("error", (error) => { log(`agent ${n}: ${error.message}`); resolve(); });
      child.on("exit", (code, signal) => {
        children.delete(child);
        log(`agent ${n} exited (${signal ?? code})`);
        resolve();
      });
    });
    // stdin errors (EPIPE once the agent is gone) end the pipe below; nothing else to do.
    child.stdin.on("error", () => {});
    const agent = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
    // Client → agent, until the connection ends its side. ndJsonStream's writable has no close
    // (core/stream.js:117-121: closing it leaves the child's stdin open), so the agent is given
    // EOF here, and SIGTERM if it is still there 2 s later or the connection aborted instead.
    const end = (graceMs) => {
      child.stdin.end();
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      }, graceMs).unref();
    };
    stream.readable.pipeTo(agent.writable).then(() => end(2000), () => end(0));
    // Agent → client, until the agent's stdout ends.
    agent.readable.pipeTo(stream.writable).catch(() => {});
    log(`connection ${n}: agent pid ${child.pid}`);
    return { closed: exited };
  },
};

const server = new AcpServer({ agent: stdioAgent });
const handleHttp = createNodeHttpHandler(server);
const wss = new WebSocketServer({ noServer: true });
const handleUpgrade = createNodeWebSocketUpgradeHandler(server, wss);

const expected = opts.token === undefined ? undefined : Buffer.from(`Bearer ${opts.token}`);
function authorized(req) {
  if (!expected) return true;
  const got = Buffer.from(req.headers.authorization ?? "");
  return got.length === expected.length && timingSafeEqual(got, expected);
}
function onAcp(req) {
  try {
    return new URL(req.url ?? "/", "http://x").pathname === "/acp";
  } catch {
    return false;
  }
}

const http = createServer((req, res) => {
  if (!onAcp(req)) {
    res.writeHead(404, { "Content-Type": "text/plain" }).end("Not Found");
    return;
  }
  if (!authorized(req)) {
    res.writeHead(401, { "Content-Type": "text/plain", "WWW-Authenticate": "Bearer" }).end("Unauthorized");
    return;
  }
  handleHttp(req, res);
});
http.on("upgrade", (req, socket, head) => {
  const refuse = (status) => {
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    socket.destroy();
  };
  if (!onAcp(req)) return refuse("404 Not Found");
  if (!authorized(req)) return refuse("401 Unauthorized");
  handleUpgrade(req, socket, head);
});

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  http.close();
  await Promise.race([server.close(), new Promise((r) => setTimeout(r, 2000))]);
  for (const child of children) child.kill("SIGTERM");
  const deadline = Date.now() + 2000;
  while (children.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  for (const child of children) child.kill("SIGKILL");
  process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

http.listen(opts.port, opts.host, () => {
  const { port } = http.address();
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  process.stdout.write(JSON.stringify({ event: "listening", port, url: `http://${host}:${port}/acp` }) + "\n");
});
