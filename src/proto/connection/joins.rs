//! A host's connection joining a session (`session/load`, `session/resume`, `session/attach`)
//! as its answer comes: failed, it is not attached and nothing held for it is sent; joined, it
//! gets what was held for it, the requests waiting for someone to attach and the permission
//! requests still open (as its history policy asks), and a `session/attach` answer says the
//! draft's role and connected clients.

use bytes::Bytes;
use serde_json::{Value, json};

use super::attach::{Attach, HistoryPolicy};
use super::state::{Asked, Connections, Join};
use crate::wire::envelope::{self, Kind, RequestId};
use crate::wire::rewrite;

impl Connections {
    /// A join failed: nothing held is sent, and the connection is not attached.
    pub(super) fn join_failed(&mut self, join: &Join) {
        self.held.remove(&join.conn);
        self.detached.push((join.conn, join.session.clone()));
        let orphaned = self.forget_asked(|c, s| c == join.conn && s == Some(&join.session));
        self.orphaned.extend(orphaned);
    }

    /// Connection `join.conn` is attached to `join.session`: the lines held for it, then the
    /// requests waiting for someone to attach, then the permission requests others were asked
    /// and have not answered (unless it asked for no history).
    pub(super) fn joined(&mut self, join: &Join) {
        let conn = join.conn;
        let s = &join.session;
        // The session is known now (a load brought it up): the connection is attached to it.
        self.created.push((s.clone(), conn));
        if let Some(mut held) = self.held.remove(&conn) {
            for line in held.take() {
                let still_asked = match envelope::peek(&line).kind {
                    Kind::Request { id, .. } => self.asked.contains_key(&id),
                    _ => true,
                };
                if still_asked {
                    self.outgoing.push_back((conn, line));
                }
            }
        }
        let observer = join.attach.is_some_and(|a| a.observer);
        if observer {
            self.observers.insert((conn, s.clone()));
        }
        if join.attach.is_some() {
            self.drafted.insert((conn, s.clone()));
        }
        if observer {
            return;
        }
        for w in self.waiting.take_session(s) {
            self.asked.insert(
                w.id,
                Asked {
                    conns: vec![conn],
                    line: w.line.clone(),
                    method: envelope::peek(&w.line)
                        .method()
                        .unwrap_or_default()
                        .to_string(),
                    session: Some(w.session),
                },
            );
            self.outgoing.push_back((conn, w.line));
        }
        if join
            .attach
            .is_some_and(|a| a.history == HistoryPolicy::None)
        {
            return;
        }
        let mut pending: Vec<(&RequestId, &mut Asked)> = self
            .asked
            .iter_mut()
            .filter(|(_, a)| {
                a.method == "session/request_permission"
                    && a.session.as_ref() == Some(s)
                    && !a.conns.contains(&conn)
            })
            .collect();
        pending.sort_by_key(|(id, _)| id.to_json());
        for (_, asked) in pending {
            asked.conns.push(conn);
            self.outgoing.push_back((conn, asked.line.clone()));
        }
    }

    /// The answer to a `session/attach`: the load's answer with the draft's `sessionId`,
    /// `role` and `connectedClients`.
    pub(super) fn attach_answer(
        &self,
        answer: &[u8],
        join: &Join,
        attach: Attach,
    ) -> Option<Bytes> {
        let role = |observer: bool| if observer { "observer" } else { "controller" };
        let clients: Vec<Value> = self
            .live
            .iter()
            .filter(|c| **c != join.conn)
            .filter_map(|c| {
                let view = self.views.get(c)?;
                let observer = self.observers.contains(&(*c, join.session.clone()));
                Some(json!({"name": view.name, "version": view.version, "role": role(observer)}))
            })
            .collect();
        rewrite::edit_line(answer, |m| {
            m.edit("result", |r| {
                r.set("sessionId", rewrite::json_string(&join.session));
                r.set("role", rewrite::json_string(role(attach.observer)));
                r.set("connectedClients", Value::Array(clients).to_string());
            });
        })
        .map(Bytes::from)
    }
}
