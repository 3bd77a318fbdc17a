#!/usr/bin/env python3
"""An ACP agent of our own for the browser page's test (not a reference peer): it sends what the
host will send once several clients share a session, so the page's handling of it is tested.

Each prompt, by its text:
  busy    refused at once: error -32000 "session busy: another client's turn is running"
  settle  a tool call with a diff and a plan; a permission request for it (id "perm-1"), taken
          back at once with `$/cancel_request` (as the host does when another client answered);
          an fs/read_text_file request; a message saying what the client answered to both; the
          tool call completed with `_meta.acpJournal.permission` (the outcome another client
          chose, as the host tells it); end_turn
  modes   a message, the mode changed to "plan" (`current_mode_update`), another message; end_turn
  events  a message; a notice; a compaction (in progress, its summary in two chunks, completed);
          a background task (spawned, its progress, completed); a message; end_turn (the
          notice's title, the summary and the task's description hold markup, to be text)
  subagent  a message; a subagent announced (`subagent_update`, child "<session>-child", as
          claude-agent-acp sends a client that declares `subagents`); the task as a
          `session_message` in both sessions' views; the child's tool call, its permission
          request (id "perm-child", waited for), the call completed, its words; its answer to the
          parent (`session_message`); its end (idle, end_turn); a message; end_turn (the task
          holds markup, to be text)
  else    one message, "You said: <prompt>", and end_turn

With --lists it keeps its own session list (`sessionCapabilities.list`), as the adapters do.
"""
import itertools
import json
import sys

from line_agent import answer_to, run, send, text, update

sessions = itertools.count()


def outcome(msg):
    if "error" in msg:
        return f"error {msg['error'].get('code')}"
    return f"result {json.dumps(msg.get('result'), sort_keys=True)}"


def prompt(mid, sid, words):
    if words == "busy":
        send({"jsonrpc": "2.0", "id": mid, "error": {
            "code": -32000, "message": "session busy: another client's turn is running"}})
        return
    if words == "settle":
        update(sid, {"sessionUpdate": "plan", "entries": [
            {"content": "edit notes.txt", "status": "in_progress", "priority": "high"},
            {"content": "tell the user", "status": "pending", "priority": "low"}]})
        tool = {"toolCallId": "edit-1", "title": "Edit notes.txt", "kind": "edit", "status": "pending",
                "locations": [{"path": "/work/notes.txt", "line": 2}],
                "content": [{"type": "diff", "path": "/work/notes.txt",
                             "oldText": "one\ntwo\nthree\n", "newText": "one\n2\nthree\n"}]}
        update(sid, {"sessionUpdate": "tool_call", **tool})
        send({"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission", "params": {
            "sessionId": sid, "toolCall": tool, "options": [
                {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
        send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "perm-1"}})
        permission = outcome(answer_to("perm-1"))
        send({"jsonrpc": "2.0", "id": "fs-1", "method": "fs/read_text_file",
              "params": {"sessionId": sid, "path": "/work/notes.txt"}})
        fs = outcome(answer_to("fs-1"))
        text(sid, f"permission: {permission}; fs: {fs}")
        update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "edit-1", "status": "completed",
                     "_meta": {"acpJournal": {"permission": {
                         "optionId": "yes", "outcome": "selected", "by": "another client"}}}})
        update(sid, {"sessionUpdate": "plan", "entries": [
            {"content": "edit notes.txt", "status": "completed", "priority": "high"},
            {"content": "tell the user", "status": "completed", "priority": "low"}]})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
        return
    if words == "modes":
        text(sid, "Switching to plan mode.")
        update(sid, {"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
        text(sid, "Planning now.")
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
        return
    if words == "events":
        text(sid, "Working.")
        update(sid, {"sessionUpdate": "notice", "severity": "warning",
                     "title": "<b>Rate</b> limited", "description": "retrying in 5 s"})
        update(sid, {"sessionUpdate": "compaction_update", "compactionId": "k1",
                     "status": "in_progress"})
        for part in ["The user asked <i>twice</i>. ", "The agent answered."]:
            update(sid, {"sessionUpdate": "compaction_summary_chunk", "compactionId": "k1",
                         "content": {"type": "text", "text": part}})
        update(sid, {"sessionUpdate": "compaction_update", "compactionId": "k1",
                     "status": "completed"})
        update(sid, {"sessionUpdate": "async_task_spawned", "asyncTaskId": "a1", "name": "build",
                     "taskType": "local_bash", "description": "cargo <build>",
                     "showInTranscript": True, "canStop": True})
        update(sid, {"sessionUpdate": "async_task_progress", "asyncTaskId": "a1",
                     "summary": "half done"})
        update(sid, {"sessionUpdate": "async_task_state_update", "asyncTaskId": "a1",
                     "state": "completed"})
        text(sid, " Done.")
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
        return
    if words == "subagent":
        subagent(sid)
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
        return
    text(sid, f"You said: {words}")
    send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})


def subagent(sid):
    child = f"{sid}-child"
    task = [{"type": "text", "text": "Find the <b>TODOs</b>."}]
    text(sid, "Asking a helper.")
    update(sid, {"sessionUpdate": "subagent_update", "sessionId": child, "title": "Look around",
                 "description": "explorer", "state": {"state": "running"}})
    message = {"sessionUpdate": "session_message", "messageId": "m-1", "senderSessionId": sid,
               "recipientSessionId": child, "content": task}
    update(sid, dict(message, recipientMessageId="m-1"))
    update(child, dict(message, senderMessageId="m-1"))
    tool = {"toolCallId": "grep-1", "title": "Grep TODO", "kind": "search", "status": "pending"}
    update(child, {"sessionUpdate": "tool_call", **tool})
    send({"jsonrpc": "2.0", "id": "perm-child", "method": "session/request_permission", "params": {
        "sessionId": child, "toolCall": tool, "options": [
            {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
    permission = outcome(answer_to("perm-child"))
    update(child, {"sessionUpdate": "tool_call_update", "toolCallId": "grep-1", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "a.rs:3: TODO"}}]})
    text(child, f"Found 1 TODO in a.rs ({permission}).")
    update(sid, {"sessionUpdate": "session_message", "messageId": "m-2", "senderSessionId": child,
                 "recipientSessionId": sid, "content": [{"type": "text", "text": "1 TODO, in a.rs."}]})
    update(sid, {"sessionUpdate": "subagent_update", "sessionId": child,
                 "state": {"state": "idle", "stopReason": "end_turn"}})
    text(sid, "The helper is done.")


run("page-agent", lambda: f"page-{next(sessions)}", prompt, lists="--lists" in sys.argv)
