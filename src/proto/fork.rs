//! `session/fork` for agents without it: the proxy copies the session's history in the journal
//! ([`super::Action::ForkJournal`], done by the shell), then brings the copy up on a fresh agent
//! session as a load (a `Loads` fork: `session/new`, mapping, re-prime) and answers with its ID.

use bytes::Bytes;

use super::context::Cx;
use super::load_request::{Asker, LoadRequest};
use super::loading::{self, Loads};
use super::vocab::{Action, HashMap, SessionId, Stamp, Target};
use crate::hex;
use crate::wire::envelope::{self, Peek, RequestId, error_json};

/// Forks waiting for their journal copy, by operation.
#[derive(Debug, Default)]
pub(super) struct Forks(HashMap<u64, LoadRequest>);

impl Forks {
    /// `session/fork` for an agent without it: the proxy forks the session in the journal
    /// (`ForkJournal`), then brings the fork up on a fresh agent session with the re-prime.
    pub(super) fn start(
        &mut self,
        cx: &mut Cx,
        at: Stamp,
        id: &RequestId,
        peek: &Peek<'_>,
        line: &Bytes,
    ) {
        let Some(mut request) = loading::parse_request(cx, at, id, peek, line, false) else {
            return;
        };
        let parent = std::mem::replace(&mut request.session, SessionId::from(""));
        request.session = SessionId::from(fork_id(&parent, at, cx.fx().next_seq()));
        request.request = Some(cx.fx().client_record(at, peek, line));
        request.fork = true;
        let op = cx.next_op();
        cx.fx().push(Action::ForkJournal {
            op,
            parent,
            fork: request.session.clone(),
            message: envelope::str_field(peek.params, "messageId"),
        });
        self.0.insert(op, request);
    }

    /// The answer to [`Action::ForkJournal`]: the fork is in the journal (bring it up on the
    /// agent and answer), or it could not be made (`error`: answer that).
    pub(super) fn forked(
        &mut self,
        cx: &mut Cx,
        loads: &mut Loads,
        at: Stamp,
        op: u64,
        outcome: Result<(), String>,
    ) {
        let Some(request) = self.0.remove(&op) else {
            return;
        };
        match outcome {
            Ok(()) => loads.start(cx, op, request),
            Err(error) => {
                if let Some(record) = request.request {
                    cx.fx().journal(Target::Run, record);
                }
                if let Asker::Client(id) = &request.asker {
                    let error = error_json(-32002, &error, None);
                    cx.fx().answer(at, Target::Run, id, Err(&error));
                }
            }
        }
    }
}

/// A new session ID for a fork of `parent` made at `at` (32 hex digits, derived from the
/// parent, the time and the record number: the core reads no randomness).
fn fork_id(parent: &str, at: Stamp, seq: u64) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{parent}\n{}\n{seq}", at.unix_us));
    hex::encode(&digest[..16])
}
