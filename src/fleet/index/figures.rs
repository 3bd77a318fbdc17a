//! The team's figures from the index's tables (`stats --store`, and the usage of `serve
//! --store`'s page): sessions, turns and tokens by agent, by host and by ISO week, and by day
//! per agent and per host; for the page also the sessions that spent the most tokens and the
//! turns' stop reasons; without reading a journal. Pure: rows in, text or rows out. Sums
//! saturate: a hostile count cannot overflow them.
//!
//! Costs (the turns' `cost`, issue 54) are summed per currency, never across currencies, in
//! billionths of their unit ([`Cost`]): exact, so every table, chart and line that shows a sum
//! shows the same digits. A turn's cost that is no amount (not a number, negative, infinite: a
//! hostile part's) is skipped, counted nowhere; a larger one than `u128` billionths holds is
//! held there, as every sum is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use super::rows::{CURRENCY_CHARS, SessionRow, TurnRow};

/// What one group (an agent, a host, a week) counts.
#[derive(Debug, Default, PartialEq)]
struct Tally {
    /// The sessions with a row or a turn in the group, each once.
    sessions: HashSet<String>,
    turns: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// By currency: its billionths, and the turns that had a cost in it.
    cost: BTreeMap<String, (u128, u64)>,
}

impl Tally {
    fn session(&mut self, id: &str) {
        if !self.sessions.contains(id) {
            self.sessions.insert(id.to_string());
        }
    }

    fn turn(&mut self, t: &TurnRow) {
        self.session(&t.session);
        self.turns = self.turns.saturating_add(1);
        self.input_tokens = self
            .input_tokens
            .saturating_add(t.input_tokens.unwrap_or(0));
        self.output_tokens = self
            .output_tokens
            .saturating_add(t.output_tokens.unwrap_or(0));
        if let (Some(amount), Some(currency)) = (t.cost.and_then(billionths), &t.currency) {
            let (sum, turns) = self.cost.entry(currency_name(currency)).or_default();
            *sum = sum.saturating_add(amount);
            *turns = turns.saturating_add(1);
        }
    }

    /// Its costs, a [`Cost`] per currency (in the order of their names).
    fn costs(&self) -> Vec<Cost> {
        self.cost
            .iter()
            .map(|(currency, &(billionths, turns))| Cost {
                currency: currency.clone(),
                amount: amount(billionths),
                turns,
                billionths,
            })
            .collect()
    }
}

/// A cost as billionths of its unit: `None` for what is no amount (not a number, negative,
/// infinite); past `u128::MAX` billionths, that many.
fn billionths(cost: f64) -> Option<u128> {
    // `as` saturates a float too large for the integer.
    (cost.is_finite() && cost >= 0.0).then(|| (cost * 1e9).round() as u128)
}

/// `billionths` of a unit as a decimal: `0.25`, `3`, `0.000000001`.
pub fn amount(billionths: u128) -> String {
    let (whole, part) = (billionths / 1_000_000_000, billionths % 1_000_000_000);
    match part {
        0 => whole.to_string(),
        _ => format!("{whole}.{part:09}")
            .trim_end_matches('0')
            .to_string(),
    }
}

/// A currency's name as the figures show it: on one line, at most [`CURRENCY_CHARS`]
/// characters (a part's cell may be longer than the writer keeps).
fn currency_name(currency: &str) -> String {
    currency
        .chars()
        .take(CURRENCY_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What a group spent in one currency.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Cost {
    /// The currency (or other unit) as the agents named it: `USD`, `credits`.
    pub currency: String,
    /// The sum, a decimal ([`amount`]): exact, in a string, so that no reader rounds it.
    pub amount: String,
    /// The turns that had a cost in it.
    pub turns: u64,
    /// The sum in billionths of the currency.
    #[serde(skip)]
    pub billionths: u128,
}

/// The figures of a store's index.
#[derive(Debug, Default)]
pub struct Figures {
    by_agent: BTreeMap<String, Tally>,
    by_host: BTreeMap<String, Tally>,
    by_week: BTreeMap<String, Tally>,
    /// By UTC day (`2026-11-29`), then `agent` or `host`, then its name.
    by_day: BTreeMap<(String, &'static str, String), Tally>,
    all: Tally,
    /// By session: its turns and tokens.
    by_session: HashMap<String, Tally>,
    /// Each session's title and agent, from its latest row.
    named: HashMap<String, (Option<String>, String)>,
    /// Turns by stop reason ([`NO_STOP_REASON`] for a turn whose row names none).
    stops: BTreeMap<String, u64>,
    /// The first and last moment a row names (Unix microseconds).
    span: Option<(i64, i64)>,
}

/// The stop reason counted for a turn whose row names none (still running, or its end lost).
pub const NO_STOP_REASON: &str = "(none)";

/// One day's sessions and turns, every agent's together (a row of [`Figures::activity`]).
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub struct Activity {
    /// The UTC day, `2026-11-29`.
    pub day: String,
    /// Sessions with a turn that day.
    pub sessions: usize,
    /// Turns started that day.
    pub turns: u64,
}

/// A session's spending (a row of [`Figures::costliest`]).
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub struct Costly {
    /// The session ID.
    pub session: String,
    /// Its title, when its row has one.
    pub title: Option<String>,
    /// Its agent (`?` when its row names none).
    pub agent: String,
    /// Its turns.
    pub turns: u64,
    /// Their input tokens.
    pub input_tokens: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// What its turns cost, per currency (none: its agent reported no cost).
    pub cost: Vec<Cost>,
}

/// How many turns ended for one reason (a row of [`Figures::stops`]).
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stop {
    /// The stop reason (`end_turn`, `cancelled`…; [`NO_STOP_REASON`] when none was recorded).
    pub reason: String,
    /// The turns that ended so.
    pub turns: u64,
}

/// One day's usage of one agent or host (a row of [`Figures::daily`]).
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub struct Daily {
    /// The UTC day, `2026-11-29`.
    pub day: String,
    /// `agent` or `host`.
    pub by: &'static str,
    /// The agent's or host's name.
    pub name: String,
    /// Sessions with a turn that day.
    pub sessions: usize,
    /// Turns started that day.
    pub turns: u64,
    /// Their input tokens.
    pub input_tokens: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// What they cost, per currency (none: no cost reported).
    pub cost: Vec<Cost>,
}

/// The rows of `daily` grouped `by` (`agent` or `host`) as CSV (RFC 4180, CRLF): a header
/// `day,<by>,sessions,turns,input_tokens,output_tokens`, then a column `cost_<currency>` per
/// currency the group's rows have a cost in (in the order of their names), then a line per row,
/// its cost in each currency a decimal ([`amount`]; empty: none). A name a spreadsheet would take
/// for a formula (`=`, `+`, `-`, `@`, a tab or a carriage return first) is given as text, behind
/// `'`; one with a comma, a quote or a line break is quoted.
pub fn csv(daily: &[Daily], by: &str) -> String {
    let field = |text: &str| {
        let text = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            format!("'{text}")
        } else {
            text.to_string()
        };
        if text.contains([',', '"', '\r', '\n']) {
            format!("\"{}\"", text.replace('"', "\"\""))
        } else {
            text
        }
    };
    let rows: Vec<&Daily> = daily.iter().filter(|d| d.by == by).collect();
    let currencies = currencies(rows.iter().copied());
    let mut out = format!("day,{by},sessions,turns,input_tokens,output_tokens");
    for currency in &currencies {
        out.push(',');
        out.push_str(&field(&format!("cost_{currency}")));
    }
    out.push_str("\r\n");
    for d in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{}",
            field(&d.day),
            field(&d.name),
            d.sessions,
            d.turns,
            d.input_tokens,
            d.output_tokens
        ));
        for currency in &currencies {
            out.push(',');
            if let Some(c) = d.cost.iter().find(|c| &c.currency == currency) {
                out.push_str(&c.amount);
            }
        }
        out.push_str("\r\n");
    }
    out
}

/// The currencies `daily` has a cost in, each once, in the order of their names.
pub fn currencies<'a>(daily: impl Iterator<Item = &'a Daily>) -> Vec<String> {
    let all: std::collections::BTreeSet<&String> = daily
        .flat_map(|d| d.cost.iter().map(|c| &c.currency))
        .collect();
    all.into_iter().cloned().collect()
}

/// `2026-11-29`: the UTC day of a moment.
fn day(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `2026-W48`: the ISO week of a moment (UTC).
fn week(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| {
            let w = t.to_zoned(jiff::tz::TimeZone::UTC).date().iso_week_date();
            format!("{:04}-W{:02}", w.year(), w.week())
        })
        .unwrap_or_else(|_| "?".into())
}

impl Figures {
    /// The figures of every session not hidden among `sessions` (each session's latest row)
    /// and of their turns (a turn found twice counted once).
    pub fn of(sessions: &[SessionRow], turns: &[TurnRow]) -> Figures {
        let mut f = Figures::default();
        let mut agent_of: HashMap<&str, &str> = HashMap::new();
        for row in sessions.iter().filter(|r| !r.hidden) {
            let agent = row.agent.as_deref().unwrap_or("?");
            agent_of.insert(&row.session, agent);
            f.named
                .insert(row.session.clone(), (row.title.clone(), agent.to_string()));
            f.by_agent
                .entry(agent.to_string())
                .or_default()
                .session(&row.session);
            f.by_host
                .entry(row.host.clone())
                .or_default()
                .session(&row.session);
            f.all.session(&row.session);
            f.seen(row.started_us);
            f.seen(row.last_activity_us);
        }
        let mut counted: HashSet<(&str, u32)> = HashSet::new();
        for t in turns {
            let Some(agent) = agent_of.get(t.session.as_str()) else {
                continue;
            };
            if !counted.insert((&t.session, t.turn)) {
                continue;
            }
            f.by_agent.entry(agent.to_string()).or_default().turn(t);
            f.by_host.entry(t.host.clone()).or_default().turn(t);
            f.by_week.entry(week(t.started_us)).or_default().turn(t);
            let on = day(t.started_us);
            for (by, name) in [("agent", agent.to_string()), ("host", t.host.clone())] {
                f.by_day.entry((on.clone(), by, name)).or_default().turn(t);
            }
            f.all.turn(t);
            f.by_session.entry(t.session.clone()).or_default().turn(t);
            let stop = f
                .stops
                .entry(
                    t.stop_reason
                        .clone()
                        .unwrap_or_else(|| NO_STOP_REASON.into()),
                )
                .or_default();
            *stop = stop.saturating_add(1);
            f.seen(t.started_us);
        }
        f
    }

    /// Sessions and turns by day, every agent's together (a session has one agent, so each
    /// counts once), oldest day first.
    pub fn activity(&self) -> Vec<Activity> {
        let mut days: BTreeMap<&str, Activity> = BTreeMap::new();
        for ((day, by, _), t) in &self.by_day {
            if *by != "agent" {
                continue;
            }
            let a = days.entry(day).or_insert_with(|| Activity {
                day: day.clone(),
                sessions: 0,
                turns: 0,
            });
            a.sessions = a.sessions.saturating_add(t.sessions.len());
            a.turns = a.turns.saturating_add(t.turns);
        }
        days.into_values().collect()
    }

    /// The `most` sessions that spent the most tokens (input and output), most first (ties in
    /// the order of their IDs); sessions that spent none left out.
    pub fn costliest(&self, most: usize) -> Vec<Costly> {
        let mut all: Vec<(&String, &Tally)> = self
            .by_session
            .iter()
            .filter(|(_, t)| t.input_tokens > 0 || t.output_tokens > 0)
            .collect();
        let spent = |t: &Tally| u128::from(t.input_tokens) + u128::from(t.output_tokens);
        all.sort_by(|(a, ta), (b, tb)| spent(tb).cmp(&spent(ta)).then(a.cmp(b)));
        all.into_iter()
            .take(most)
            .map(|(session, t)| {
                let (title, agent) = self.named.get(session).cloned().unwrap_or_default();
                Costly {
                    session: session.clone(),
                    title,
                    agent,
                    turns: t.turns,
                    input_tokens: t.input_tokens,
                    output_tokens: t.output_tokens,
                    cost: t.costs(),
                }
            })
            .collect()
    }

    /// The turns by stop reason, most first (ties in the order of the reasons).
    pub fn stops(&self) -> Vec<Stop> {
        let mut stops: Vec<Stop> = self
            .stops
            .iter()
            .map(|(reason, turns)| Stop {
                reason: reason.clone(),
                turns: *turns,
            })
            .collect();
        stops.sort_by(|a, b| b.turns.cmp(&a.turns).then(a.reason.cmp(&b.reason)));
        stops
    }

    /// The usage by day, per agent and per host, oldest day first.
    pub fn daily(&self) -> Vec<Daily> {
        self.by_day
            .iter()
            .map(|((day, by, name), t)| Daily {
                day: day.clone(),
                by,
                name: name.clone(),
                sessions: t.sessions.len(),
                turns: t.turns,
                input_tokens: t.input_tokens,
                output_tokens: t.output_tokens,
                cost: t.costs(),
            })
            .collect()
    }

    /// The figures' last line: `6 sessions, 12 turns, 0 input and 0 output tokens, from 3
    /// hosts, 2026-11-29 09:00 to 2026-11-29 09:05 UTC`; with what the turns cost, per
    /// currency, where any had a cost: `…, 900 output tokens, costing 1.75 USD + 3 EUR, from 3
    /// hosts, …`.
    pub fn summary(&self) -> String {
        let a = &self.all;
        let costs: Vec<String> = a
            .costs()
            .iter()
            .map(|c| format!("{} {}", c.amount, c.currency))
            .collect();
        let costing = match costs.is_empty() {
            true => String::new(),
            false => format!(", costing {}", costs.join(" + ")),
        };
        let mut text = format!(
            "{} sessions, {} turns, {} input and {} output tokens{costing}, from {} hosts",
            a.sessions.len(),
            a.turns,
            a.input_tokens,
            a.output_tokens,
            self.by_host.len()
        );
        if let Some((first, last)) = self.span {
            let at = |us: i64| {
                jiff::Timestamp::from_microsecond(us)
                    .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
                    .unwrap_or_default()
            };
            text.push_str(&format!(", {} to {} UTC", at(first), at(last)));
        }
        text
    }

    fn seen(&mut self, us: i64) {
        self.span = Some(match self.span {
            Some((a, b)) => (a.min(us), b.max(us)),
            None => (us, us),
        });
    }
}

/// A group's name on one line of the table: at most 40 characters.
fn name(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(39) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (title, groups) in [
            ("AGENT", &self.by_agent),
            ("HOST", &self.by_host),
            ("WEEK", &self.by_week),
        ] {
            writeln!(
                out,
                "{title:<40} {:>9} {:>9} {:>14} {:>14}",
                "SESSIONS", "TURNS", "INPUT TOKENS", "OUTPUT TOKENS"
            )?;
            for (group, t) in groups {
                writeln!(
                    out,
                    "{:<40} {:>9} {:>9} {:>14} {:>14}",
                    name(group),
                    t.sessions.len(),
                    t.turns,
                    t.input_tokens,
                    t.output_tokens
                )?;
            }
            writeln!(out)?;
        }
        writeln!(out, "{}", self.summary())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daily_figures_as_csv_keep_names_text() {
        let row = |by: &'static str, name: &str| Daily {
            day: "2026-11-29".into(),
            by,
            name: name.into(),
            sessions: 2,
            turns: 5,
            input_tokens: 10,
            output_tokens: 20,
            cost: vec![],
        };
        let daily = [
            row("agent", "echo"),
            row("host", "h-1"),
            row("agent", "=HYPERLINK(\"x\")"),
            row("agent", "a,b\nc"),
            row("agent", "-1+2"),
        ];
        assert_eq!(
            csv(&daily, "agent"),
            "day,agent,sessions,turns,input_tokens,output_tokens\r\n\
             2026-11-29,echo,2,5,10,20\r\n\
             2026-11-29,\"'=HYPERLINK(\"\"x\"\")\",2,5,10,20\r\n\
             2026-11-29,\"a,b\nc\",2,5,10,20\r\n\
             2026-11-29,'-1+2,2,5,10,20\r\n"
        );
        assert_eq!(
            csv(&daily, "host"),
            "day,host,sessions,turns,input_tokens,output_tokens\r\n2026-11-29,h-1,2,5,10,20\r\n"
        );
    }

    fn session(id: &str, agent: &str, host: &str, hidden: bool) -> SessionRow {
        SessionRow {
            session: id.into(),
            agent: Some(agent.into()),
            host: host.into(),
            started_us: 1_795_000_000_000_000,
            last_activity_us: 1_795_000_100_000_000,
            hidden,
            ..SessionRow::default()
        }
    }

    fn turn(id: &str, n: u32, host: &str, days: i64, tokens: u64) -> TurnRow {
        TurnRow {
            session: id.into(),
            turn: n,
            host: host.into(),
            started_us: 1_795_000_000_000_000 + days * 86_400_000_000,
            input_tokens: Some(tokens),
            output_tokens: Some(tokens / 2),
            ..TurnRow::default()
        }
    }

    #[test]
    fn each_turn_and_session_counts_once_in_each_group_and_hidden_sessions_not_at_all() {
        let sessions = [
            session("a", "claude", "h1", false),
            session("b", "codex", "h2", false),
            session("gone", "codex", "h2", true),
        ];
        let turns = [
            turn("a", 1, "h1", 0, 100),
            turn("a", 1, "h1", 0, 100), // the same turn in two parts
            turn("a", 2, "h2", 8, 10),  // continued on another host, a week later
            turn("b", 1, "h2", 0, 1),
            turn("gone", 1, "h2", 0, 1000),
            turn("unknown", 1, "h3", 0, 1000),
        ];
        let f = Figures::of(&sessions, &turns);
        assert_eq!(f.all.sessions.len(), 2);
        assert_eq!(
            (f.all.turns, f.all.input_tokens, f.all.output_tokens),
            (3, 111, 55)
        );
        assert_eq!(f.by_agent["claude"].turns, 2);
        assert_eq!(f.by_agent["codex"].sessions.len(), 1);
        assert_eq!(f.by_host["h2"].sessions.len(), 2, "a (its turn 2) and b");
        assert_eq!(f.by_host.len(), 2, "{:?}", f.by_host.keys());
        assert_eq!(f.by_week.len(), 2);
        let daily = f.daily();
        let of = |by: &str, name: &str| -> Vec<(String, u64, u64)> {
            daily
                .iter()
                .filter(|d| d.by == by && d.name == name)
                .map(|d| (d.day.clone(), d.turns, d.input_tokens))
                .collect()
        };
        let (first, later) = (day(1_795_000_000_000_000), day(1_795_691_200_000_000));
        assert_eq!(
            of("agent", "claude"),
            [(first.clone(), 1, 100), (later.clone(), 1, 10)]
        );
        assert_eq!(of("host", "h2"), [(first, 1, 1), (later, 1, 10)]);
        assert_eq!(
            daily
                .iter()
                .filter(|d| d.by == "agent")
                .map(|d| d.turns)
                .sum::<u64>(),
            3
        );
        let text = f.to_string();
        assert!(
            text.contains("2 sessions, 3 turns, 111 input and 55 output tokens, from 2 hosts"),
            "{text}"
        );
        assert!(
            !text.contains("gone") && !text.contains("unknown"),
            "{text}"
        );
    }

    #[test]
    fn the_page_s_figures_count_days_costly_sessions_and_stop_reasons_saturating() {
        let sessions = [
            SessionRow {
                title: Some("fix the build".into()),
                ..session("a", "claude", "h1", false)
            },
            session("b", "codex", "h2", false),
            session("c", "codex", "h2", false),
        ];
        let stopped = |mut t: TurnRow, why: Option<&str>| {
            t.stop_reason = why.map(str::to_string);
            t
        };
        let turns = [
            stopped(turn("a", 1, "h1", 0, 100), Some("end_turn")),
            stopped(turn("a", 2, "h2", 1, u64::MAX), Some("cancelled")),
            stopped(turn("b", 1, "h2", 0, 7), Some("end_turn")),
            stopped(turn("c", 1, "h2", 0, 0), None),
        ];
        let f = Figures::of(&sessions, &turns);
        let first = day(1_795_000_000_000_000);
        let activity = f.activity();
        assert_eq!(activity.len(), 2);
        assert_eq!(
            (
                activity[0].day.as_str(),
                activity[0].sessions,
                activity[0].turns
            ),
            (first.as_str(), 3, 3)
        );
        let costly = f.costliest(10);
        let ids: Vec<&str> = costly.iter().map(|c| c.session.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "c spent nothing");
        assert_eq!(costly[0].title.as_deref(), Some("fix the build"));
        assert_eq!(costly[0].agent, "claude");
        assert_eq!(costly[0].input_tokens, u64::MAX, "saturated, not wrapped");
        assert_eq!(f.costliest(1).len(), 1);
        let stops = f.stops();
        let stops: Vec<(&str, u64)> = stops.iter().map(|s| (s.reason.as_str(), s.turns)).collect();
        assert_eq!(
            stops,
            [("end_turn", 2), (NO_STOP_REASON, 1), ("cancelled", 1)]
        );
    }

    fn costing(mut t: TurnRow, cost: f64, currency: &str) -> TurnRow {
        t.cost = Some(cost);
        t.currency = Some(currency.into());
        t
    }

    /// A day's costs: `(amount, currency, turns)` each.
    type DayCosts = Vec<(String, String, u64)>;

    /// `daily`'s costs of one agent or host, per day.
    fn costs_of(daily: &[Daily], by: &str, name: &str) -> Vec<(String, DayCosts)> {
        daily
            .iter()
            .filter(|d| d.by == by && d.name == name)
            .map(|d| {
                let costs = d.cost.iter();
                let costs = costs.map(|c| (c.amount.clone(), c.currency.clone(), c.turns));
                (d.day.clone(), costs.collect())
            })
            .collect()
    }

    #[test]
    fn costs_are_summed_per_day_per_agent_and_host_per_currency_exactly() {
        let sessions = [
            session("a", "claude", "h1", false),
            session("b", "codex", "h2", false),
        ];
        let turns = [
            // 0.1 + 0.2 is 0.3, not 0.30000000000000004.
            costing(turn("a", 1, "h1", 0, 10), 0.1, "USD"),
            costing(turn("a", 2, "h1", 0, 10), 0.2, "USD"),
            // The same day, another currency: each shown.
            costing(turn("a", 3, "h2", 0, 10), 5.0, "EUR"),
            // No cost reported.
            turn("a", 4, "h1", 0, 10),
            costing(turn("b", 1, "h2", 1, 10), 0.000_000_001, "USD"),
        ];
        let f = Figures::of(&sessions, &turns);
        let daily = f.daily();
        let (first, next) = (day(1_795_000_000_000_000), day(1_795_086_400_000_000));
        let usd = |amount: &str, turns| (amount.to_string(), "USD".to_string(), turns);
        let eur = |amount: &str, turns| (amount.to_string(), "EUR".to_string(), turns);
        assert_eq!(
            costs_of(&daily, "agent", "claude"),
            [(first.clone(), vec![eur("5", 1), usd("0.3", 2)])]
        );
        assert_eq!(
            costs_of(&daily, "host", "h1"),
            [(first.clone(), vec![usd("0.3", 2)])]
        );
        assert_eq!(
            costs_of(&daily, "host", "h2"),
            [
                (first, vec![eur("5", 1)]),
                (next, vec![usd("0.000000001", 1)])
            ]
        );
        assert_eq!(currencies(daily.iter()), ["EUR", "USD"]);
        let costly = f.costliest(1);
        let cost: Vec<(&str, &str)> = costly[0]
            .cost
            .iter()
            .map(|c| (c.amount.as_str(), c.currency.as_str()))
            .collect();
        assert_eq!(cost, [("5", "EUR"), ("0.3", "USD")]);
        // The CSV: a column per currency, empty where a row has none.
        let csv = csv(&daily, "host");
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "day,host,sessions,turns,input_tokens,output_tokens,cost_EUR,cost_USD"
        );
        assert!(lines[1].ends_with(",3,30,15,,0.3"), "{csv}");
        assert!(lines[2].ends_with(",10,5,5,"), "{csv}");
        assert!(lines[3].ends_with(",5,,0.000000001"), "{csv}");
    }

    #[test]
    fn the_summary_says_what_the_turns_cost_per_currency_where_any_had_a_cost() {
        let sessions = [session("a", "claude", "h1", false)];
        let turns = [turn("a", 1, "h1", 0, 10), turn("a", 2, "h1", 0, 10)];
        let plain = Figures::of(&sessions, &turns).summary();
        assert!(
            plain.starts_with("1 sessions, 2 turns, 20 input and 10 output tokens, from 1 hosts, "),
            "no cost, no word of it: {plain}"
        );
        let turns = [
            costing(turn("a", 1, "h1", 0, 10), 1.25, "USD"),
            costing(turn("a", 2, "h1", 0, 10), 0.5, "USD"),
            costing(turn("a", 3, "h1", 0, 10), 3.0, "EUR"),
        ];
        let f = Figures::of(&sessions, &turns);
        assert!(
            f.summary().starts_with(
                "1 sessions, 3 turns, 30 input and 15 output tokens, costing 3 EUR + 1.75 USD, from 1 hosts, "
            ),
            "{}",
            f.summary()
        );
        assert_eq!(f.to_string().lines().last().unwrap(), f.summary());
    }

    #[test]
    fn a_hostile_part_s_costs_are_skipped_or_held_and_never_wrap() {
        let sessions = [session("a", "claude", "h1", false)];
        let turns = [
            costing(turn("a", 1, "h1", 0, 1), f64::NAN, "USD"),
            costing(turn("a", 2, "h1", 0, 1), -1.0, "USD"),
            costing(turn("a", 3, "h1", 0, 1), f64::INFINITY, "USD"),
            costing(turn("a", 4, "h1", 0, 1), f64::NEG_INFINITY, "USD"),
            // A cost without a currency counts in none.
            TurnRow {
                cost: Some(1.0),
                ..turn("a", 5, "h1", 0, 1)
            },
            costing(turn("a", 6, "h1", 0, 1), 2.5, "USD"),
            // Past what u128 billionths hold: held there, twice, not wrapped.
            costing(turn("a", 7, "h1", 0, 1), f64::MAX, "credits"),
            costing(turn("a", 8, "h1", 0, 1), 1e300, "credits"),
            // A currency past its bound, with a line break: cut, on one line.
            costing(
                turn("a", 9, "h1", 0, 1),
                1.0,
                &format!("\u{1b}[31m{}", "X".repeat(99)),
            ),
        ];
        let f = Figures::of(&sessions, &turns);
        let costs = f.all.costs();
        let got: Vec<(&str, u64, u128)> = costs
            .iter()
            .map(|c| (c.currency.as_str(), c.turns, c.billionths))
            .collect();
        let long = format!(" [31m{}", "X".repeat(CURRENCY_CHARS - 5));
        assert_eq!(
            got,
            [
                (long.as_str(), 1, 1_000_000_000),
                ("USD", 1, 2_500_000_000),
                ("credits", 2, u128::MAX),
            ]
        );
        assert_eq!(f.all.turns, 9, "every turn counts as a turn");
        assert_eq!(amount(u128::MAX).len(), 40);
        assert_eq!(amount(0), "0");
        assert_eq!(amount(1_500_000_000), "1.5");
    }

    #[test]
    fn weeks_are_iso_weeks_and_names_stay_on_one_short_line() {
        // 2026-11-28 (a Saturday) is in ISO week 48; 2027-01-01 is in 2026's week 53.
        assert_eq!(week(1_795_824_000_000_000), "2026-W48");
        assert_eq!(week(1_798_761_600_000_000), "2026-W53");
        assert_eq!(name("a\nb"), "a b");
        assert_eq!(name(&"x".repeat(50)).chars().count(), 40);
    }
}
