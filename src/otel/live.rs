//! The proxy's tracing hook ([`Hook`]): sees every action the shell applies, and
//!
//! - with `--otlp`, hands each session record (a cheap clone: the payload is shared) to an
//!   exporter thread through a bounded queue with `try_send`, never waiting. The thread builds
//!   spans with [`SpanBuilder`] and POSTs them in batches. The thread polls the queue (every
//!   10 ms when it is empty) rather than sleeping on it, so a send never wakes a thread: the
//!   relay pays for a clone and a queue push, nothing more; and it runs at nice 19, so on a
//!   busy machine the relay gets the CPU first. A full queue drops the record, a
//!   failed or slow POST (bounded by a timeout) drops its spans; both are counted, and
//!   [`Hook::finish`] reports them for the journal ([`Dropped`]).
//! - with `--trace-context`, writes the W3C `traceparent` of the turn's `invoke_agent` span
//!   into a `session/prompt` forwarded to the agent (`params._meta.traceparent`, unless the
//!   client already set one). The journal keeps the client's bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::http::Endpoint;
use super::span::{SpanContext, prompt_ids};
use super::spans::SpanBuilder;
use crate::journal::{Body, Record};
use crate::proto::{Action, Peer, SessionId, Target};
use crate::wire::rewrite::{edit_line, json_string};
use crate::wire::{Side, envelope};

/// Records waiting for the exporter thread, at most.
pub const QUEUE: usize = 16 * 1024;
/// Spans per POST, at most.
const BATCH: usize = 256;
/// How long spans wait for more before they are sent.
const LINGER: Duration = Duration::from_millis(200);
/// How often the exporter thread looks at its queue when it is empty.
const TICK: Duration = Duration::from_millis(10);
/// One POST gives up after this.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What the live export lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Spans built but not accepted by the backend (down, slow, refusing, or not done by the end).
    pub spans: u64,
    /// Session records the exporter never saw (its queue was full).
    pub records: u64,
}

/// What the proxy traces.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--otlp`: export spans live to this endpoint.
    pub endpoint: Option<Endpoint>,
    /// `--otlp-content`: spans carry prompt and output text, tool arguments and results.
    pub content: bool,
    /// `--trace-context`: inject `traceparent` into forwarded prompts.
    pub trace_context: bool,
}

impl Options {
    /// Whether there is anything to do.
    pub fn enabled(&self) -> bool {
        self.endpoint.is_some() || self.trace_context
    }
}

enum Msg {
    Open {
        session: SessionId,
        initialize: Option<Bytes>,
    },
    Record {
        session: SessionId,
        record: Record,
    },
    Finish,
}

#[derive(Default)]
struct Stats {
    built: AtomicU64,
    sent: AtomicU64,
}

struct Export {
    tx: SyncSender<Msg>,
    dropped_records: u64,
    stats: Arc<Stats>,
    done: Receiver<()>,
}

/// The proxy's tracing hook; the shell calls [`Hook::action`] on every action before applying it.
pub struct Hook {
    export: Option<Export>,
    trace_context: bool,
    /// The IDs of the last prompt journaled, for the `traceparent` of its forward.
    prompt: Option<SpanContext>,
}

impl Hook {
    /// A hook doing what `options` ask; starts the exporter thread for `--otlp`.
    pub fn new(options: Options) -> Hook {
        let export = options.endpoint.map(|endpoint| {
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            let (done_tx, done) = mpsc::channel();
            let stats = Arc::new(Stats::default());
            let thread_stats = stats.clone();
            let content = options.content;
            std::thread::Builder::new()
                .name("otlp".into())
                .spawn(move || exporter(endpoint, content, rx, thread_stats, done_tx))
                .expect("spawning the OTLP exporter thread");
            Export {
                tx,
                dropped_records: 0,
                stats,
                done,
            }
        });
        Hook {
            export,
            trace_context: options.trace_context,
            prompt: None,
        }
    }

    /// See `action` on its way to be applied; may edit a forwarded prompt (`--trace-context`).
    pub fn action(&mut self, action: &mut Action) {
        match action {
            Action::OpenSession {
                session,
                initialize,
                ..
            } => self.send(Msg::Open {
                session: session.clone(),
                initialize: initialize.response.clone(),
            }),
            Action::Journal {
                target: Target::Session(session),
                record,
            } => {
                if self.trace_context && is_client_prompt(record) {
                    self.prompt = prompt_ids(session, record);
                }
                if self.export.is_some() {
                    self.send(Msg::Record {
                        session: session.clone(),
                        record: record.clone(),
                    });
                }
            }
            Action::Forward {
                to: Peer::Agent,
                line,
            } if self.trace_context => {
                if envelope::peek(line).method() == Some("session/prompt")
                    && let Some(context) = self.prompt.take()
                    && let Some(edited) = with_traceparent(line, &context)
                {
                    *line = Bytes::from(edited);
                }
            }
            _ => {}
        }
    }

    fn send(&mut self, msg: Msg) {
        if let Some(export) = self.export.as_mut() {
            match export.tx.try_send(msg) {
                Ok(()) => {}
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    export.dropped_records += 1;
                }
            }
        }
    }

    /// The run ends: let the exporter send what it has, waiting at most `wait`; what was lost.
    pub fn finish(self, wait: Duration) -> Dropped {
        let Some(export) = self.export else {
            return Dropped::default();
        };
        let deadline = Instant::now() + wait;
        let mut finish = Msg::Finish;
        loop {
            match export.tx.try_send(finish) {
                Err(TrySendError::Full(msg)) if Instant::now() < deadline => {
                    finish = msg;
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => break,
            }
        }
        let _ = export
            .done
            .recv_timeout(deadline.saturating_duration_since(Instant::now()));
        let built = export.stats.built.load(Ordering::Acquire);
        let sent = export.stats.sent.load(Ordering::Acquire);
        Dropped {
            spans: built.saturating_sub(sent),
            records: export.dropped_records,
        }
    }
}

fn is_client_prompt(record: &Record) -> bool {
    matches!(&record.body, Body::Message { from: Side::Client, payload }
        if envelope::peek(&payload.bytes).method() == Some("session/prompt"))
}

/// `line` with `params._meta.traceparent` naming `context`, unless it has one already.
pub fn with_traceparent(line: &[u8], context: &SpanContext) -> Option<Vec<u8>> {
    edit_line(line, |message| {
        message.edit("params", |params| {
            params.edit("_meta", |meta| {
                if meta.get("traceparent").is_none() {
                    meta.set("traceparent", json_string(&context.traceparent()));
                }
            });
        });
    })
}

/// The exporter thread: records → spans → batches POSTed to `endpoint`.
fn exporter(
    endpoint: Endpoint,
    content: bool,
    rx: Receiver<Msg>,
    stats: Arc<Stats>,
    done: mpsc::Sender<()>,
) {
    // The lowest priority: on a busy machine the relay's threads get the CPU first (and the
    // queue, if it fills, drops records rather than slowing them).
    // SAFETY: plain syscalls on the calling thread's own id.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
    let client = endpoint.client(TIMEOUT);
    let mut builders: HashMap<SessionId, SpanBuilder> = HashMap::new();
    let mut batch = Vec::new();
    let mut since: Option<Instant> = None;
    let mut failures = 0u64;
    loop {
        let before = batch.len();
        // Polled, never blocked on: a send from the relay then never has a thread to wake.
        let finish = match rx.try_recv() {
            Ok(Msg::Open {
                session,
                initialize,
            }) => {
                let builder = builders
                    .entry(session.clone())
                    .or_insert_with(|| SpanBuilder::new(&session, content));
                if let Some(response) =
                    initialize.and_then(|r| serde_json::from_slice::<serde_json::Value>(&r).ok())
                {
                    builder.initialize(&response);
                }
                false
            }
            Ok(Msg::Record { session, record }) => {
                let builder = builders
                    .entry(session.clone())
                    .or_insert_with(|| SpanBuilder::new(&session, content));
                builder.record(&record);
                batch.extend(builder.take());
                false
            }
            Ok(Msg::Finish) | Err(TryRecvError::Disconnected) => {
                for builder in builders.values_mut() {
                    builder.end_run();
                    batch.extend(builder.take());
                }
                true
            }
            Err(TryRecvError::Empty) => {
                std::thread::sleep(TICK);
                false
            }
        };
        if batch.len() > before {
            stats
                .built
                .fetch_add((batch.len() - before) as u64, Ordering::AcqRel);
            since.get_or_insert_with(Instant::now);
        }
        let due = since.is_some_and(|t| t.elapsed() >= LINGER);
        if !batch.is_empty() && (finish || due || batch.len() >= BATCH) {
            for chunk in batch.chunks(BATCH) {
                match endpoint.post(&client, chunk) {
                    Ok(()) => {
                        stats.sent.fetch_add(chunk.len() as u64, Ordering::AcqRel);
                    }
                    Err(e) => {
                        failures += 1;
                        if failures == 1 {
                            tracing::warn!("OTLP export failed (spans dropped): {e}");
                        }
                    }
                }
            }
            batch.clear();
            since = None;
        }
        if finish {
            let _ = done.send(());
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Payload;

    fn prompt_record() -> Record {
        Record {
            seq: 1,
            unix_us: 42,
            mono_us: 0,
            body: Body::Message {
                from: Side::Client,
                payload: Payload::from_line(Bytes::from_static(
                    br#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#,
                )),
            },
        }
    }

    #[test]
    fn trace_context_names_the_turn_span_in_the_forwarded_prompt_only() {
        let mut hook = Hook::new(Options {
            trace_context: true,
            ..Options::default()
        });
        let mut journal = Action::Journal {
            target: Target::Session("S".into()),
            record: prompt_record(),
        };
        hook.action(&mut journal);
        assert_eq!(
            journal,
            Action::Journal {
                target: Target::Session("S".into()),
                record: prompt_record(),
            }
        );
        let line = Bytes::from_static(
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"S\",\"prompt\":[]}}\n",
        );
        let mut forward = Action::Forward {
            to: Peer::Agent,
            line,
        };
        hook.action(&mut forward);
        let Action::Forward { line, .. } = forward else {
            unreachable!()
        };
        let ids = super::super::span::turn_ids("S", 42, "7");
        let want = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"S\",\"prompt\":[],\"_meta\":{{\"traceparent\":\"{}\"}}}}}}\n",
            ids.traceparent()
        );
        assert_eq!(std::str::from_utf8(&line).unwrap(), want);
        // A client's own traceparent is kept.
        let own = br#"{"method":"session/prompt","params":{"_meta":{"traceparent":"x"}}}"#;
        assert_eq!(with_traceparent(own, &ids).unwrap(), own.to_vec());
        assert_eq!(hook.finish(Duration::ZERO), Dropped::default());
    }

    #[test]
    fn a_down_backend_drops_and_counts_spans_without_blocking() {
        // A port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let endpoint =
            Endpoint::from_env(Some(&format!("http://127.0.0.1:{port}")), |_| None).unwrap();
        let mut hook = Hook::new(Options {
            endpoint: Some(endpoint),
            ..Options::default()
        });
        let mut journal = Action::Journal {
            target: Target::Session("S".into()),
            record: prompt_record(),
        };
        hook.action(&mut journal);
        let dropped = hook.finish(Duration::from_secs(5));
        // The open turn ends at the end of the run: one span, not delivered.
        assert_eq!(
            dropped,
            Dropped {
                spans: 1,
                records: 0
            }
        );
    }
}
