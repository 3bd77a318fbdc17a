//! `acp-journal share`: a read-only link to one session of the shared store, printed; the
//! store's links listed (`--list`) and revoked (`--revoke`). The records are
//! [`crate::fleet::share`]'s; `serve --store` serves the links (`crate::net::share`), and its
//! page's Share button makes them through [`make`] too.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::cli::ShareArgs;
use crate::fleet::share::{self, Record, Secret};
use crate::fleet::store::Store;
use crate::journal::JournalDir;

/// Where the link starts when neither `--url` nor `$ACP_JOURNAL_URL` says: `serve`'s own
/// default address.
const DEFAULT_BASE: &str = "http://127.0.0.1:8080";

/// `share`: make, list or revoke links of the store at `url`.
///
/// # Errors
/// No store, a name that names no session of it, a life over 30 days, or the store's.
pub(super) fn run(
    local: &JournalDir,
    args: ShareArgs,
    url: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let Some(url) = url else {
        anyhow::bail!("share: name the store with --store URL (links are kept in the store)");
    };
    let mut out = std::io::stdout().lock();
    if args.list {
        let now = jiff::Timestamp::now().as_microsecond();
        let records = on_store(url, |store| async move { share::list(&store).await })?;
        writeln!(
            out,
            "{:<34}  {:<20}  {:<20}  {:<8}  BY",
            "SESSION", "CREATED", "EXPIRES", "STATE"
        )?;
        for (_, record) in &records {
            writeln!(
                out,
                "{:<34}  {:<20}  {:<20}  {:<8}  {}@{}",
                record.session.escape_debug().to_string(),
                day_time(record.created),
                day_time(record.expires),
                record.state(now).as_str(),
                record.user.escape_debug(),
                record.host.escape_debug(),
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(what) = args.revoke {
        let now = jiff::Timestamp::now().as_microsecond();
        // A link, or its secret: that one record.
        let secret = what.rsplit('/').next().and_then(Secret::parse);
        let keys: Vec<String> = match secret {
            Some(secret) => vec![secret.key()],
            None => on_store(url, |store| async move { share::list(&store).await })?
                .into_iter()
                .filter(|(_, r)| r.session == what)
                .map(|(key, _)| key)
                .collect(),
        };
        let mut revoked = 0;
        for key in keys {
            if on_store(url, |store| async move {
                share::revoke(&store, &key, now).await
            })? {
                revoked += 1;
            }
        }
        if revoked == 0 {
            anyhow::bail!(
                "share --revoke: {what:?} is no link of {url}, nor the ID of a session with links (see `share --list`)"
            );
        }
        writeln!(
            out,
            "revoked {revoked} link{}: refused on every host within a minute",
            if revoked == 1 { "" } else { "s" }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let name = args.session.context("share which session?")?;
    let id = super::from_store::session_named(url, &name)?;
    local.create_dirs()?;
    let host = crate::fleet::host_id(local)?;
    let (secret, record) = make(url, &id, args.expires, &host, &user())?;
    let base = args.url.as_deref().unwrap_or(DEFAULT_BASE);
    writeln!(out, "{}{}", base.trim_end_matches('/'), path(&secret))?;
    let _ = writeln!(
        std::io::stderr(),
        "acp-journal: a read-only link to {} until {} (revoke it with `share --revoke LINK`)",
        record.session.escape_debug(),
        day_time(record.expires)
    );
    Ok(ExitCode::SUCCESS)
}

/// A new link to session `id` (its exact ID, a session of the store: the caller looked)
/// lasting `life`, made by `user` on `host`, its record written to the store at `url`.
///
/// # Errors
/// A life of nothing or over 30 days, or the store's.
pub(super) fn make(
    url: &str,
    id: &str,
    life: Duration,
    host: &str,
    user: &str,
) -> anyhow::Result<(Secret, Record)> {
    let now = jiff::Timestamp::now().as_microsecond();
    let record = Record::new(id, now, life, host, user).map_err(anyhow::Error::msg)?;
    let secret = Secret::new()?;
    let (made, written) = (secret.clone(), record.clone());
    on_store(url, |store| async move {
        share::create(&store, &made, &written).await
    })?;
    Ok((secret, record))
}

/// The record of the link whose secret is `secret` in the store at `url`, or `None` (no such
/// record, or `secret` is no secret).
///
/// # Errors
/// The store's.
pub(super) fn record(url: &str, secret: &str) -> anyhow::Result<Option<Record>> {
    let Some(secret) = Secret::parse(secret) else {
        return Ok(None);
    };
    let key = secret.key();
    on_store(url, |store| async move { share::read(&store, &key).await })
}

/// The path of a link: `/share/<secret>`.
pub(super) fn path(secret: &Secret) -> String {
    format!("/share/{}", secret.as_str())
}

/// `work` done on the store at `url`, on a runtime of its own.
fn on_store<T, F>(url: &str, work: impl FnOnce(Store) -> F) -> anyhow::Result<T>
where
    F: Future<Output = Result<T, crate::fleet::store::Error>>,
{
    let store = Store::open(url)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime
        .block_on(work(store))
        .map_err(|e| anyhow::anyhow!("the share links of {url}: {e}"))
}

/// Who runs this: `$USER`, else `$LOGNAME`, else the user ID.
fn user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| {
            // SAFETY: getuid cannot fail.
            format!("uid {}", unsafe { libc::getuid() })
        })
}

/// Unix microseconds as `YYYY-MM-DD HH:MM UTC` (the number itself when out of range).
fn day_time(us: i64) -> String {
    Some(crate::render::minute(us))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| us.to_string())
}
