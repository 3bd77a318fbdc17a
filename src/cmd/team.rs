//! The store's side of `serve --store`'s team view ([`crate::net::team`]): the readings of
//! `list --store --json`, `search --store` and `export --store --format html` (a session read
//! and then followed: [`super::team_follow`]), each through the same local copy of the store
//! ([`from_store::pulled`]) and the same code as the command;
//! and the usage, from the index's tables as `stats --store` reads them, with its charts
//! ([`crate::render::charts`]).

use std::sync::Arc;

use serde_json::json;

use super::from_store::{self, Limits};
use crate::catalog::{Catalog, SessionSummary};
use crate::cli::{Command, ListArgs, SearchArgs};
use crate::fleet::Fleet;
use crate::fleet::listing::Listing;
use crate::net::team::{Failure, Filters, Follower, Link, PAGE, Rendered, Team};
use crate::render::charts;

/// Matches a search answers with, at most.
const MAX_FOUND: usize = 200;
/// The sessions the usage names as the costliest.
const COSTLIEST: usize = 10;

/// The team view of the store at `url`, served by host `host` (its `host-id`).
#[derive(Debug)]
pub(super) struct StoreTeam {
    pub(super) url: String,
    pub(super) limits: Limits,
    pub(super) host: String,
    /// This host's link to the store, when it has one (its listing is shared).
    pub(super) fleet: Option<Fleet>,
}

impl StoreTeam {
    /// The usage, as `stats --store` counts it.
    fn figures(&self) -> Result<crate::fleet::index::figures::Figures, Failure> {
        from_store::figures(&self.url)
            .map_err(|e| Failure::Store(format!("{e:#}")))?
            .ok_or_else(|| {
                Failure::NotFound(
                    "the store has no index to count from (`acp-journal index rebuild` writes it)"
                        .into(),
                )
            })
    }

    /// The store's sessions as `list --store` reads them (`args`): this host's own reading of
    /// the store when the index answered it ([`Fleet::listing`], shared with its
    /// `session/list` and every request made within its two seconds), else the command's.
    fn listing(&self, args: &ListArgs) -> Result<Arc<Listing>, Failure> {
        let failed = |e: &dyn std::fmt::Display| Failure::Store(format!("{e:#}"));
        if let Some(fleet) = &self.fleet {
            let listing = fleet.listing().map_err(|e| failed(&e))?;
            if listing.indexed {
                return Ok(listing);
            }
        }
        let (copy, hosts) = self.read(&Command::List(args.clone()))?;
        let sessions = copy.sessions_with(false).map_err(|e| failed(&e))?;
        Ok(Arc::new(Listing {
            sessions,
            hosts,
            indexed: false,
        }))
    }

    fn read(
        &self,
        command: &Command,
    ) -> Result<(crate::journal::JournalDir, from_store::Hosts), Failure> {
        from_store::pulled(&self.url, command, self.limits)
            .map_err(|e| Failure::Store(format!("{e:#}")))
    }
}

/// `value` as a JSON body.
fn body(value: &serde_json::Value) -> Result<Vec<u8>, Failure> {
    serde_json::to_vec(value).map_err(|e| Failure::Store(e.to_string()))
}

impl Team for StoreTeam {
    fn sessions(&self, filters: &Filters) -> Result<Vec<u8>, Failure> {
        let args = ListArgs {
            cwd: None,
            agent: filters.agent.clone(),
            since: None,
            rebuild_catalog: false,
            json: true,
            commit: None,
        };
        let listing = self.listing(&args)?;
        let hosts_of = |s: &SessionSummary| -> Vec<&String> {
            listing
                .hosts
                .get(&s.session)
                .into_iter()
                .flatten()
                .collect()
        };
        let under = |cwd: Option<&str>, dir: &str| {
            cwd.is_some_and(|cwd| {
                let dir = dir.trim_end_matches('/');
                cwd == dir
                    || cwd
                        .strip_prefix(dir)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
        };
        // Filtered on the summaries; rows made for the page shown only. A copy of the store
        // gives each session the state its hosts' catalogs say (`list::state`).
        let kept: Vec<&SessionSummary> = super::list::select(&listing.sessions, &args)
            .into_iter()
            .filter(|s| {
                filters
                    .host
                    .as_ref()
                    .is_none_or(|h| hosts_of(s).contains(&h))
                    && filters
                        .cwd
                        .as_deref()
                        .is_none_or(|dir| under(s.cwd.as_deref(), dir))
                    && filters
                        .state
                        .as_deref()
                        .is_none_or(|state| s.store_state() == state)
                    && filters.from_us.is_none_or(|t| s.updated >= t)
                    && filters.to_us.is_none_or(|t| s.updated < t)
            })
            .collect();
        let total = kept.len();
        let page: Vec<_> = kept
            .into_iter()
            .skip(filters.page.saturating_mul(PAGE))
            .take(PAGE)
            .map(|s| {
                let mut row = super::list::row(s, s.store_state());
                row["hosts"] = json!(hosts_of(s));
                row
            })
            .collect();
        body(&json!({
            "sessions": page,
            "page": filters.page,
            "pages": total.div_ceil(PAGE),
            "total": total,
        }))
    }

    fn search(&self, text: &str) -> Result<Vec<u8>, Failure> {
        let pattern = regex::escape(text);
        if crate::fleet::index::reader::required_words(&pattern).is_none() {
            return Err(Failure::Bad(
                "search for a word (letters or digits): the index looks words up".into(),
            ));
        }
        let compiled =
            regex::bytes::Regex::new(&pattern).map_err(|e| Failure::Bad(e.to_string()))?;
        let args = SearchArgs {
            pattern,
            session: None,
            cwd: None,
            scan: false,
        };
        let (copy, _) = self.read(&Command::Search(args))?;
        let mut found = Vec::new();
        let mut more = false;
        let targets = super::search::targets(&copy, None, None)
            .map_err(|e| Failure::Store(format!("{e:#}")))?;
        // Matched and excerpted redacted, as every answer of the page is.
        super::search::scan(targets, &compiled, true, &mut |f| {
            if found.len() == MAX_FOUND {
                more = true;
                return Ok(false);
            }
            found.push(json!({
                "session": f.session, "turn": f.turn, "from": f.from.as_str(),
                "subagent": f.subagent, "context": f.context,
            }));
            Ok(true)
        })
        .map_err(|e| Failure::Store(format!("{e:#}")))?;
        body(&json!({ "matches": found, "more": more }))
    }

    fn session(&self, id: &str) -> Result<Vec<u8>, Failure> {
        Ok(self.follow(id)?.0.html.to_vec())
    }

    fn follow(&self, id: &str) -> Result<(Rendered, Option<Box<dyn Follower>>), Failure> {
        let (rendered, follower) = super::team_follow::read(&self.url, self.limits, id)?;
        let follower: Option<Box<dyn Follower>> = match rendered.open {
            true => Some(Box::new(follower)),
            false => None,
        };
        Ok((rendered, follower))
    }

    fn usage(&self) -> Result<Vec<u8>, Failure> {
        let figures = self.figures()?;
        let (daily, activity) = (figures.daily(), figures.activity());
        let (costliest, stops) = (figures.costliest(COSTLIEST), figures.stops());
        let charts = json!({
            "agent": charts::tokens_by_day(&daily, "agent"),
            "host": charts::tokens_by_day(&daily, "host"),
            "cost-agent": charts::cost_by_day(&daily, "agent"),
            "cost-host": charts::cost_by_day(&daily, "host"),
            "activity": charts::activity(&activity),
            "costliest": charts::costliest(&costliest),
            "stops": charts::stop_reasons(&stops),
        });
        body(&json!({
            "summary": figures.summary(),
            "daily": daily,
            "currencies": crate::fleet::index::figures::currencies(daily.iter()),
            "activity": activity,
            "costliest": costliest,
            "stops": stops,
            "charts": charts,
            "max_days": charts::MAX_DAYS,
        }))
    }

    fn usage_csv(&self, by: &str) -> Result<Vec<u8>, Failure> {
        Ok(crate::fleet::index::figures::csv(&self.figures()?.daily(), by).into_bytes())
    }

    fn share(&self, id: &str, life: std::time::Duration) -> Result<Vec<u8>, Failure> {
        let copy =
            from_store::catalog_copy(&self.url).map_err(|e| Failure::Store(format!("{e:#}")))?;
        let sessions = copy
            .sessions_with(false)
            .map_err(|e| Failure::Store(format!("{e:#}")))?;
        // The ID itself (the page names sessions by their IDs), never a prefix.
        if !sessions.iter().any(|s| s.session == id && !s.deleted) {
            return Err(Failure::NotFound("no such session in the store".into()));
        }
        let (secret, record) = super::share::make(&self.url, id, life, &self.host, "page")
            .map_err(|e| Failure::Store(format!("{e:#}")))?;
        body(&json!({
            "path": super::share::path(&secret),
            "session": record.session,
            "expires": jiff::Timestamp::from_microsecond(record.expires)
                .map(|t| t.to_string())
                .unwrap_or_default(),
        }))
    }

    fn link(&self, secret: &str) -> Result<Option<Link>, Failure> {
        let record = super::share::record(&self.url, secret)
            .map_err(|e| Failure::Store(format!("{e:#}")))?;
        Ok(record.map(|r| Link {
            session: r.session,
            expires: r.expires,
            revoked: r.revoked.is_some(),
            host: r.host,
            user: r.user,
        }))
    }
}
