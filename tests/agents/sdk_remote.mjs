// An ACP v1 client on the TypeScript SDK 2.4.0's remote transports
// (`experimental/http-client`, `experimental/ws-client`; pinned by scripts/install-peers.sh).
// Our own test driver around the SDK's client transport (the peer under test is the transport),
// with the same command line and output as tests/agents/sdk_remote.py:
//   sdk_remote.mjs --url URL --transport http|ws [--token T] [--cwd DIR]
//                  [--session ID (--load|--resume)] [--prompt TEXT]... [--permission allow|reject|never]
//                  [--drop-after N] [--list] [--linger SECONDS]
// One JSON object per line on stdout: initialized, list, loaded, resumed, session, update,
// permission, result, error (then exit 1). --list: session/list after initialize (and no
// session/new unless there are prompts). --drop-after N: after N session/update notifications
// during the first prompt, exit at once without closing anything (a laptop lid). Otherwise the
// connection is closed cleanly before exit 0 (HTTP: the SDK's DELETE; WebSocket: a close frame,
// awaited). TLS: NODE_EXTRA_CA_CERTS.
import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import WebSocket from "ws";

const argv = process.argv.slice(2);
const opts = { prompt: [], permission: "allow", linger: 0, list: false };
for (let i = 0; i < argv.length; i++) {
  const flag = argv[i];
  const value = () => argv[++i];
  switch (flag) {
    case "--url": opts.url = value(); break;
    case "--transport": opts.transport = value(); break;
    case "--token": opts.token = value(); break;
    case "--cwd": opts.cwd = value(); break;
    case "--session": opts.session = value(); break;
    case "--load": opts.load = true; break;
    case "--resume": opts.resume = true; break;
    case "--prompt": opts.prompt.push(value()); break;
    case "--permission": opts.permission = value(); break;
    case "--drop-after": opts.dropAfter = Number(value()); break;
    case "--list": opts.list = true; break;
    case "--linger": opts.linger = Number(value()); break;
    default: throw new Error(`unknown option ${flag}`);
  }
}
const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");

const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
// The sockets the SDK opens, to await the close handshake before exiting.
const sockets = [];
class TrackedWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    sockets.push(this);
  }
}
const transport = opts.transport === "ws"
  ? createWebSocketStream(opts.url.replace(/^http/, "ws"), { headers, WebSocket: TrackedWebSocket })
  : createHttpStream(opts.url, { headers });
// The connection ends the transport by cancelling its readable, without awaiting it
// (core/jsonrpc.js:532): keep that promise, which on HTTP is the DELETE (http-stream.js:482-492).
let closing = Promise.resolve();
const reader = transport.readable.getReader();
const stream = {
  writable: transport.writable,
  readable: new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      closing = reader.cancel(reason);
      return closing;
    },
  }),
};
async function closed() {
  const timeout = new Promise((resolve) => setTimeout(resolve, 3000).unref());
  await Promise.race([closing.catch(() => {}), timeout]);
  await Promise.race([
    Promise.all(sockets.map((ws) => ws.readyState === WebSocket.CLOSED
      ? undefined : new Promise((resolve) => ws.once("close", resolve)))),
    timeout,
  ]);
}

// session/prompt; refused while another client's turn runs in the session ("session busy"), it is
// sent again after 0.25 s (event busy).
async function promptWhenFree(cx, sessionId, text) {
  for (let tries = 0; tries < 400; tries++) {
    try {
      return await cx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    } catch (error) {
      if (!(error?.code === -32000 && String(error?.message).includes("busy"))) throw error;
      emit({ event: "busy" });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  throw new Error("the session stayed busy");
}

let updates = 0;
let prompting = false;
const app = acp.client({ name: "acp-journal-tests" })
  .onNotification("session/update", async ({ params }) => {
    emit({ event: "update", sessionId: params.sessionId, update: params.update });
    if (!prompting) return;
    updates += 1;
    if (opts.dropAfter !== undefined && updates >= opts.dropAfter) process.exit(0);
  })
  .onRequest("session/request_permission", async ({ params }) => {
    if (opts.permission === "never") {
      emit({ event: "permission", request: params, answer: null });
      return new Promise(() => {});
    }
    const kind = opts.permission === "allow" ? "allow" : "reject";
    const chosen = params.options.find((o) => String(o.kind).startsWith(kind)) ?? params.options[0];
    const answer = { outcome: { outcome: "selected", optionId: chosen.optionId } };
    emit({ event: "permission", request: params, answer });
    return answer;
  });

try {
  await app.connectWith(stream, async (cx) => {
    const init = await cx.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "acp-journal-tests", version: "0" },
    });
    emit({ event: "initialized", agentCapabilities: init.agentCapabilities });
    if (opts.list) {
      const listed = await cx.request("session/list", {});
      emit({ event: "list", sessions: listed.sessions, nextCursor: listed.nextCursor });
      if (!opts.session && opts.prompt.length === 0) return;
    }
    const cwd = opts.cwd ?? process.cwd();
    let sessionId = opts.session;
    if (sessionId && opts.resume) {
      await cx.request("session/resume", { sessionId, cwd, mcpServers: [] });
      emit({ event: "resumed" });
    } else if (sessionId) {
      await cx.request("session/load", { sessionId, cwd, mcpServers: [] });
      emit({ event: "loaded" });
    } else {
      sessionId = (await cx.request("session/new", { cwd, mcpServers: [] })).sessionId;
    }
    emit({ event: "session", sessionId });
    for (const [i, text] of opts.prompt.entries()) {
      prompting = i === 0;
      const result = await promptWhenFree(cx, sessionId, text);
      prompting = false;
      emit({ event: "result", stopReason: result.stopReason });
    }
    if (opts.linger) await new Promise((resolve) => setTimeout(resolve, opts.linger * 1000));
  });
} catch (error) {
  emit({ event: "error", message: String(error?.message ?? error) });
  process.exit(1);
}
await closed();
process.exit(0);
