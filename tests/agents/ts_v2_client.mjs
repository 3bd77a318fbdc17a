// An ACP v2 client written with the TypeScript SDK's `experimental/v2` API (pinned by
// scripts/install-peers.sh): starts the agent command it is given, then, by mode:
//   converse CWD TEXT...          a new session and one turn per TEXT, each read until the
//                                 idle state that ends it
//   resume CWD SESSION TEXT       session/resume replaying from the start, then one turn
// and prints one JSON line: {session, initialize, turns: [text...], replayed: [update...]}.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const [mode, cwd, ...rest] = process.argv.slice(2);
const sep = process.argv.indexOf("--");
const command = process.argv.slice(sep + 1);
const args = rest.slice(0, rest.indexOf("--"));

const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const replayed = [];
const app = acp.client({ name: "acp-journal-tests" })
  .onNotification("session/update", async ({ params }) => { replayed.push(params.update); })
  .onRequest("session/request_permission", async ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options[0].optionId },
  }));

// The agent text of a turn: the session's updates until an idle that ends foreground work
// (one with a stopReason; an agent may report its initial idle state first).
async function readTurn(session) {
  let text = "";
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop" && message.stopReason) return text;
    if (message.kind === "session_update" && message.update.sessionUpdate === "agent_message_chunk") {
      text += message.update.content.text ?? "";
    }
  }
}

const out = await app.connectWith(stream, async (cx) => {
  const initialize = await cx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-journal-tests", version: "0" },
    capabilities: {},
  });
  const turns = [];
  if (mode === "converse") {
    const session = await cx.buildSession(cwd).start();
    for (const text of args) {
      await session.prompt(text);
      turns.push(await readTurn(session));
    }
    return { session: session.sessionId, initialize, turns };
  }
  const [sessionId, text] = args;
  await cx.request("session/resume", { sessionId, cwd, replayFrom: { type: "start" } });
  const before = replayed.length;
  await cx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  // The turn's text, until the agent's idle state that ends it (the resume's own idle, which
  // may be delivered after its answer, ends no turn: it has no stopReason).
  for (;;) {
    const idle = replayed.slice(before).find((u) => u.sessionUpdate === "state_update" && u.state === "idle" && u.stopReason);
    if (idle) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const said = replayed.slice(before)
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content.text).join("");
  const kinds = ["user_message", "user_message_chunk", "agent_message", "agent_message_chunk"];
  return {
    session: sessionId,
    initialize,
    turns: [said],
    replayed: replayed.slice(0, before).filter((u) => kinds.includes(u.sessionUpdate)),
  };
});
process.stdout.write(JSON.stringify(out) + "\n");
child.stdin.end();
await new Promise((r) => child.on("exit", r));
process.exit(0);
