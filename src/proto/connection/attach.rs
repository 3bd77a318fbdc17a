//! What a `session/attach` (the multi-client draft's) asks for: its role and history policy,
//! parsed from its params.

use serde_json::Value;

/// What a `session/attach` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::proto) struct Attach {
    pub(in crate::proto) observer: bool,
    pub(in crate::proto) history: HistoryPolicy,
}

/// The multi-client draft's `historyPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::proto) enum HistoryPolicy {
    /// The whole history, as `session/load` replays it.
    Full,
    /// Only what waits for an answer (the pending permission requests).
    PendingOnly,
    /// Nothing: only what happens from now on.
    None,
}

impl Attach {
    /// The params of a `session/attach`; `Err` with the message of an invalid value.
    pub(in crate::proto) fn parse(
        params: Option<crate::wire::envelope::Raw<'_>>,
    ) -> Result<Attach, String> {
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let observer = match params["role"].as_str() {
            None | Some("controller") => false,
            Some("observer") => true,
            Some(other) => return Err(format!("unknown role {other:?}")),
        };
        let history = match params["historyPolicy"].as_str() {
            None | Some("full") => HistoryPolicy::Full,
            Some("pending_only") => HistoryPolicy::PendingOnly,
            Some("none") => HistoryPolicy::None,
            Some(other) => return Err(format!("unknown historyPolicy {other:?}")),
        };
        Ok(Attach { observer, history })
    }
}
