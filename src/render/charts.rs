//! The charts of `serve --store`'s usage view, drawn on the server as SVG (no script, no
//! style element or attribute: the page's policy allows neither): pure functions from the
//! index's figures ([`crate::fleet::index::figures`]) to an SVG string the page adopts.
//!
//! Each is readable without colour: every series has a pattern of its own as well as a
//! colour, a legend in text, and every bar a `<title>` with its exact numbers; the axes have
//! labelled ticks. Every name from the store is escaped, cut to `NAME_CHARS` (32) characters and
//! kept to characters XML allows. Charts by day show at most the last [`MAX_DAYS`] days the
//! figures hold, and say so when they hold more. Sums are taken in `u128`, so no count
//! overflows them; figures with nothing to draw draw "no usage yet".

use std::collections::BTreeMap;
use std::fmt::Write;

use jiff::ToSpan;
use jiff::civil::Date;

use super::html::escape;
use crate::fleet::index::figures::{self, Activity, Costly, Daily, Stop};

/// The most days a chart by day shows (the last ones).
pub const MAX_DAYS: usize = 60;
/// The most series a chart draws: past it, the smallest are drawn together as "others".
const MAX_SERIES: usize = 8;
/// The longest name shown, in characters.
const NAME_CHARS: usize = 32;
/// A chart's width, in SVG units.
const WIDTH: f64 = 760.0;
/// A chart by day's plot: its top, height, left (room for the ticks' labels) and right.
const TOP: f64 = 22.0;
const PLOT: f64 = 200.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = WIDTH - 12.0;
/// A legend's line, and a ranked chart's row, in SVG units.
const LINE: f64 = 18.0;
/// The colours of the series, in turn (each also has a pattern: [`pattern`]).
const COLOURS: [&str; MAX_SERIES] = [
    "#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#1b7c83", "#57606a",
];

/// Tokens (input and output) per day, stacked by agent or host (`by`): the rows of `daily`
/// of that group.
pub fn tokens_by_day(daily: &[Daily], by: &str) -> String {
    let rows: Vec<&Daily> = daily.iter().filter(|d| d.by == by).collect();
    let series = Series::of(
        rows.iter().map(|d| {
            (
                d.name.as_str(),
                u128::from(d.input_tokens) + u128::from(d.output_tokens),
            )
        }),
        by,
    );
    let Some(window) = Window::of(rows.iter().map(|d| d.day.as_str())) else {
        return nothing(&format!("Tokens per day by {by}"), "no usage yet");
    };
    let mut cells = vec![vec![Cell::default(); series.labels.len()]; window.days.len()];
    for d in &rows {
        let Some(at) = window.at(&d.day) else {
            continue;
        };
        let cell = &mut cells[at][series.at(&d.name)];
        cell.input += u128::from(d.input_tokens);
        cell.output += u128::from(d.output_tokens);
        cell.turns += u128::from(d.turns);
        cell.sessions += d.sessions as u128;
    }
    let bars = cells
        .iter()
        .zip(&window.days)
        .map(|(day, date)| {
            day.iter()
                .zip(&series.labels)
                .map(|(c, name)| {
                    // A series with no turn that day has no bar; one with turns but no tokens
                    // reported has a bar of no height, its title saying so.
                    (c.turns > 0).then(|| Bar {
                        value: c.input + c.output,
                        title: format!(
                            "{date} · {}\n{} input and {} output tokens, {} turns, {} sessions",
                            escape(name),
                            c.input,
                            c.output,
                            c.turns,
                            c.sessions
                        ),
                    })
                })
                .collect()
        })
        .collect();
    columns(&Columns {
        id: &format!("tokens-{by}"),
        label: &format!("Tokens per day by {by}"),
        unit: "tokens",
        tick: short,
        window: &window,
        series: &series.labels,
        bars,
        stacked: true,
    })
}

/// The most currencies drawn, a chart each, by agent or host: those of the most turns.
pub const MAX_CURRENCIES: usize = 4;

/// What the turns cost per day, stacked by agent or host (`by`): a chart per currency (amounts
/// of two currencies are never added), at most [`MAX_CURRENCIES`] of them, those of the most
/// turns with a cost, and then a line saying how many more the table has; "no cost reported"
/// when no turn had one.
pub fn cost_by_day(daily: &[Daily], by: &str) -> Vec<String> {
    let rows: Vec<&Daily> = daily.iter().filter(|d| d.by == by).collect();
    let mut turns: BTreeMap<&str, u128> = BTreeMap::new();
    for cost in rows.iter().flat_map(|d| &d.cost) {
        *turns.entry(&cost.currency).or_default() += u128::from(cost.turns);
    }
    let mut currencies: Vec<(&str, u128)> = turns.into_iter().collect();
    currencies.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let title = format!("Cost per day by {by}");
    if currencies.is_empty() {
        return vec![nothing(&title, "no cost reported")];
    }
    let mut charts: Vec<String> = currencies
        .iter()
        .take(MAX_CURRENCIES)
        .enumerate()
        .map(|(n, (currency, _))| cost_chart(&rows, by, currency, n))
        .collect();
    if currencies.len() > MAX_CURRENCIES {
        let more = currencies.len() - MAX_CURRENCIES;
        charts.push(nothing(
            &title,
            &format!("and {more} more currencies: their costs are in the table"),
        ));
    }
    charts
}

/// The chart of one currency of [`cost_by_day`], the `n`th.
fn cost_chart(rows: &[&Daily], by: &str, currency: &str, n: usize) -> String {
    let in_it = |d: &Daily| d.cost.iter().find(|c| c.currency == currency).cloned();
    let series = Series::of(
        rows.iter()
            .filter_map(|d| Some((d.name.as_str(), in_it(d)?.billionths))),
        by,
    );
    let Some(window) = Window::of(rows.iter().map(|d| d.day.as_str())) else {
        return nothing(&format!("Cost per day by {by}"), "no cost reported");
    };
    // Billionths of the currency, and turns, by day and series.
    let mut cells = vec![vec![(0u128, 0u128, 0u128); series.labels.len()]; window.days.len()];
    for d in rows {
        if let (Some(at), Some(cost)) = (window.at(&d.day), in_it(d)) {
            let cell = &mut cells[at][series.at(&d.name)];
            cell.0 = cell.0.saturating_add(cost.billionths);
            cell.1 += u128::from(cost.turns);
            cell.2 += d.sessions as u128;
        }
    }
    let unit = escape(&label(currency)).to_string();
    let bars = cells
        .iter()
        .zip(&window.days)
        .map(|(day, date)| {
            day.iter()
                .zip(&series.labels)
                .map(|(&(billionths, turns, sessions), name)| {
                    (turns > 0).then(|| Bar {
                        // Drawn at most u64::MAX billionths (18 billion units) high, so that
                        // a day's stack cannot overflow; its title says the whole amount.
                        value: billionths.min(u128::from(u64::MAX)),
                        title: format!(
                            "{date} · {}\n{} {unit}, {turns} turns, {sessions} sessions",
                            escape(name),
                            figures::amount(billionths)
                        ),
                    })
                })
                .collect()
        })
        .collect();
    columns(&Columns {
        id: &format!("cost-{by}-{n}"),
        label: &format!("Cost per day by {by}, in {}", label(currency)),
        unit: &unit,
        tick: money,
        window: &window,
        series: &series.labels,
        bars,
        stacked: true,
    })
}

/// The series of a chart by day: the names, the biggest (by their weights summed) first; past
/// [`MAX_SERIES`], the rest drawn as one, "others".
struct Series<'a> {
    kept: Vec<&'a str>,
    labels: Vec<String>,
}

impl<'a> Series<'a> {
    /// The series of `weights` (a name and a weight, a name as many times as it comes) of
    /// names of agents or hosts (`by`).
    fn of(weights: impl Iterator<Item = (&'a str, u128)>, by: &str) -> Series<'a> {
        let mut summed: BTreeMap<&str, u128> = BTreeMap::new();
        for (name, weight) in weights {
            let sum = summed.entry(name).or_default();
            *sum = sum.saturating_add(weight);
        }
        let mut names: Vec<(&str, u128)> = summed.into_iter().collect();
        names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let kept = if names.len() > MAX_SERIES {
            MAX_SERIES - 1
        } else {
            names.len()
        };
        let mut labels: Vec<String> = names[..kept].iter().map(|(n, _)| label(n)).collect();
        if names.len() > kept {
            labels.push(format!("others ({} {by}s)", names.len() - kept));
        }
        Series {
            kept: names[..kept].iter().map(|(n, _)| *n).collect(),
            labels,
        }
    }

    /// The series of `name`: its own, else the others'.
    fn at(&self, name: &str) -> usize {
        self.kept
            .iter()
            .position(|n| *n == name)
            .unwrap_or(self.kept.len())
    }
}

/// Sessions and turns per day, side by side.
pub fn activity(activity: &[Activity]) -> String {
    let Some(window) = Window::of(activity.iter().map(|a| a.day.as_str())) else {
        return nothing("Sessions and turns per day", "no usage yet");
    };
    let mut counts = vec![(0u128, 0u128); window.days.len()];
    for a in activity {
        if let Some(at) = window.at(&a.day) {
            counts[at].0 += a.sessions as u128;
            counts[at].1 += u128::from(a.turns);
        }
    }
    let bars = counts
        .iter()
        .zip(&window.days)
        .map(|(&(sessions, turns), date)| {
            let title = format!("{date}\n{sessions} sessions, {turns} turns");
            [sessions, turns]
                .into_iter()
                .map(|value| {
                    (turns > 0).then(|| Bar {
                        value,
                        title: title.clone(),
                    })
                })
                .collect()
        })
        .collect();
    columns(&Columns {
        id: "activity",
        label: "Sessions and turns per day",
        unit: "",
        tick: short,
        window: &window,
        series: &["sessions".to_string(), "turns".to_string()],
        bars,
        stacked: false,
    })
}

/// The sessions that spent the most tokens, a bar each, most first, each a link to open it
/// on the page (`<a data-session="ID">`).
pub fn costliest(rows: &[Costly]) -> String {
    let ranks: Vec<Rank> = rows
        .iter()
        .map(|c| {
            let name = c.title.as_deref().unwrap_or(&c.session);
            // What it cost, per currency, where its agent said: `, 0.25 USD`.
            let cost: String = c
                .cost
                .iter()
                .map(|c| format!(", {} {}", c.amount, escape(&label(&c.currency))))
                .collect();
            Rank {
                name: label(name),
                value: u128::from(c.input_tokens) + u128::from(c.output_tokens),
                title: format!(
                    "{}\nsession {} ({}): {} input and {} output tokens, {} turns{cost}",
                    escape(&label(name)),
                    escape(&xml_text(&c.session)),
                    escape(&label(&c.agent)),
                    c.input_tokens,
                    c.output_tokens,
                    c.turns
                ),
                session: Some(xml_text(&c.session)),
            }
        })
        .collect();
    ranked(
        "costliest",
        "The sessions that cost most, by tokens",
        &ranks,
    )
}

/// The turns by stop reason, a bar each.
pub fn stop_reasons(stops: &[Stop]) -> String {
    let ranks: Vec<Rank> = stops
        .iter()
        .map(|s| Rank {
            name: label(&s.reason),
            value: u128::from(s.turns),
            title: format!("{}: {} turns", escape(&label(&s.reason)), s.turns),
            session: None,
        })
        .collect();
    ranked("stops", "Turns by stop reason", &ranks)
}

/// What one series counts on one day of the tokens chart.
#[derive(Clone, Copy, Default)]
struct Cell {
    input: u128,
    output: u128,
    turns: u128,
    sessions: u128,
}

/// One bar (or a bar's part): its value and its `<title>` (markup, its text escaped).
struct Bar {
    value: u128,
    title: String,
}

/// The days a chart by day shows: every day from the first to the last the figures hold, at
/// most the last [`MAX_DAYS`]; and how many days they span.
struct Window {
    days: Vec<Date>,
    spanned: i64,
}

impl Window {
    /// The window over `days` (`2026-11-29`; what does not parse as a day is left out), or
    /// `None` when there is none.
    fn of<'a>(days: impl Iterator<Item = &'a str>) -> Option<Window> {
        let parsed: Vec<Date> = days.filter_map(|d| d.parse().ok()).collect();
        let (first, last) = (*parsed.iter().min()?, *parsed.iter().max()?);
        let spanned = first.until(last).ok()?.get_days() as i64 + 1;
        let shown = spanned.min(MAX_DAYS as i64);
        let start = last.checked_sub((shown - 1).days()).ok()?;
        let days = (0..shown)
            .filter_map(|i| start.checked_add(i.days()).ok())
            .collect();
        Some(Window { days, spanned })
    }

    /// Where `day` is among the days shown.
    fn at(&self, day: &str) -> Option<usize> {
        let date: Date = day.parse().ok()?;
        self.days.iter().position(|d| *d == date)
    }
}

/// A chart of bars by day.
struct Columns<'a> {
    /// Its id, the prefix of its patterns' (unique on the page).
    id: &'a str,
    label: &'a str,
    /// What the values count, said on the axis (markup, its text escaped).
    unit: &'a str,
    /// A tick's label.
    tick: fn(u128) -> String,
    window: &'a Window,
    series: &'a [String],
    /// By day, then by series (`None`: nothing that day).
    bars: Vec<Vec<Option<Bar>>>,
    /// Stacked, else side by side.
    stacked: bool,
}

fn columns(c: &Columns) -> String {
    let height_of = |day: &Vec<Option<Bar>>| -> u128 {
        let values = day.iter().flatten().map(|b| b.value);
        if c.stacked {
            values.sum()
        } else {
            values.max().unwrap_or(0)
        }
    };
    let highest = c.bars.iter().map(height_of).max().unwrap_or(0);
    let (step, top) = ticks(highest);
    let legend_top = TOP + PLOT + 44.0;
    let height = legend_top + LINE * c.series.len() as f64 + 8.0;
    let mut svg = open(c.id, c.label, height);
    defs(&mut svg, c.id, c.series.len());
    value_axis(&mut svg, c, step, top);
    let y = |value: u128| TOP + PLOT - (value as f64 / top as f64) * PLOT;
    // The bars.
    let days = c.window.days.len();
    let slot = (RIGHT - LEFT) / days as f64;
    // No wider than a few bars' width when there are few days.
    let most = if c.stacked {
        32.0
    } else {
        24.0 * c.series.len() as f64
    };
    let width = (slot * 0.8).clamp(1.0, most);
    for (i, day) in c.bars.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - width) / 2.0;
        let mut base = 0u128;
        for (s, bar) in day.iter().enumerate() {
            let Some(bar) = bar else {
                continue;
            };
            let (x, w, from) = if c.stacked {
                (x, width, base)
            } else {
                let w = width / day.len() as f64;
                (x + w * s as f64, w, 0)
            };
            let (y1, y0) = (y(from + bar.value), y(from));
            let _ = write!(
                svg,
                r#"<rect class="chart-bar" x="{x:.2}" y="{y1:.2}" width="{w:.2}" height="{:.2}" fill="url(#{}-p{s})" stroke="currentColor" stroke-width="0.5"><title>{}</title></rect>"#,
                if bar.value == 0 {
                    0.0
                } else {
                    (y0 - y1).max(0.5)
                },
                c.id,
                bar.title
            );
            if c.stacked {
                base += bar.value;
            }
        }
    }
    day_axis(&mut svg, c.window, slot);
    legend(&mut svg, c.id, c.series, legend_top);
    svg.push_str("</svg>");
    svg
}

/// The value axis of a chart by day whose ticks are `step` apart up to `top`: its ticks,
/// labelled, their lines across, and what the values count.
fn value_axis(svg: &mut String, c: &Columns, step: u128, top: u128) {
    let y = |value: u128| TOP + PLOT - (value as f64 / top as f64) * PLOT;
    let mut tick = 0u128;
    while tick <= top {
        let at = y(tick);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{RIGHT}" y1="{at:.1}" y2="{at:.1}" stroke="currentColor" stroke-opacity="0.2"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 4.0,
            at + 4.0,
            (c.tick)(tick)
        );
        tick += step;
    }
    if !c.unit.is_empty() {
        let _ = write!(
            svg,
            r#"<text x="4" y="{:.1}">{}</text>"#,
            TOP - 10.0,
            c.unit
        );
    }
}

/// The day axis of a chart by day whose days are `slot` wide: its line, about eight labelled
/// days, and which days it shows.
fn day_axis(svg: &mut String, window: &Window, slot: f64) {
    let days = window.days.len();
    let axis = TOP + PLOT;
    let _ = write!(
        svg,
        r#"<line x1="{LEFT}" x2="{RIGHT}" y1="{axis}" y2="{axis}" stroke="currentColor"/>"#
    );
    let every = days.div_ceil(8);
    for (i, date) in window.days.iter().enumerate() {
        if i % every == 0 || i + 1 == days {
            let x = LEFT + slot * (i as f64 + 0.5);
            let _ = write!(
                svg,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{axis}" y2="{:.1}" stroke="currentColor"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                axis + 4.0,
                axis + 16.0,
                date.strftime("%m-%d")
            );
        }
    }
    let (first, last) = (window.days[0], window.days[days - 1]);
    let mut caption = format!("UTC days, {first} to {last}");
    if window.spanned > days as i64 {
        let _ = write!(
            caption,
            ": the last {days} of the {} days the figures hold (the table has them all)",
            window.spanned
        );
    }
    let _ = write!(
        svg,
        r#"<text class="chart-caption" x="{LEFT}" y="{:.1}">{caption}</text>"#,
        axis + 32.0
    );
}

/// One bar of a ranked chart.
struct Rank {
    /// Its name, already cut ([`label`]).
    name: String,
    value: u128,
    /// Its `<title>` (markup, its text escaped).
    title: String,
    /// The session it opens, XML-safe ([`xml_text`]).
    session: Option<String>,
}

/// Bars across, one a row, each named on its left and its value on its right.
fn ranked(id: &str, title: &str, ranks: &[Rank]) -> String {
    if ranks.is_empty() {
        return nothing(title, "no usage yet");
    }
    let highest = ranks.iter().map(|r| r.value).max().unwrap_or(0).max(1);
    let (left, right) = (WIDTH * 0.36, WIDTH - 110.0);
    let mut svg = open(id, title, LINE * 1.5 * ranks.len() as f64 + 8.0);
    defs(&mut svg, id, 1);
    for (i, r) in ranks.iter().enumerate() {
        let y = 4.0 + LINE * 1.5 * i as f64;
        let w = ((r.value as f64 / highest as f64) * (right - left)).max(1.0);
        let row = format!(
            r#"<title>{}</title><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect class="chart-bar" x="{left:.1}" y="{y:.1}" width="{w:.2}" height="{LINE}" fill="url(#{id}-p0)" stroke="currentColor" stroke-width="0.5"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            r.title,
            left - 6.0,
            y + 13.0,
            escape(&r.name),
            left + w + 6.0,
            y + 13.0,
            r.value
        );
        match &r.session {
            Some(session) => {
                let _ = write!(
                    svg,
                    r##"<a class="chart-link" href="#" data-session="{}">{row}</a>"##,
                    escape(session)
                );
            }
            None => {
                let _ = write!(svg, "<g>{row}</g>");
            }
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The start of a chart `height` units tall: its root, named `title`.
fn open(id: &str, title: &str, height: f64) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart chart-{id}" viewBox="0 0 {WIDTH} {height:.0}" width="{WIDTH}" height="{height:.0}" role="group" aria-label="{}" font-family="system-ui, sans-serif" font-size="11" fill="currentColor">"#,
        escape(title)
    )
}

/// A chart named `title` saying it has nothing to draw: `why` (no markup).
fn nothing(title: &str, why: &str) -> String {
    let mut svg = open("empty", title, 40.0);
    let _ = write!(svg, r#"<text x="8" y="24">{}</text></svg>"#, escape(why));
    svg
}

/// The patterns of `count` series, `<id>-p0`…: each a colour and, over it, marks of its own
/// (none, lines of four slants, crosses, dots, rings), so that series differ without colour.
fn defs(svg: &mut String, id: &str, count: usize) {
    svg.push_str("<defs>");
    for s in 0..count {
        let colour = COLOURS[s % COLOURS.len()];
        let marks = match s % MAX_SERIES {
            0 => "",
            1 => r##"<path d="M0 8L8 0" stroke="#fff" stroke-width="2"/>"##,
            2 => r##"<path d="M0 0L8 8" stroke="#fff" stroke-width="2"/>"##,
            3 => r##"<path d="M0 4H8" stroke="#fff" stroke-width="2"/>"##,
            4 => r##"<path d="M4 0V8" stroke="#fff" stroke-width="2"/>"##,
            5 => r##"<path d="M0 8L8 0M0 0L8 8" stroke="#fff" stroke-width="1.5"/>"##,
            6 => r##"<circle cx="4" cy="4" r="1.6" fill="#fff"/>"##,
            _ => {
                r##"<circle cx="4" cy="4" r="2.4" fill="none" stroke="#fff" stroke-width="1.2"/>"##
            }
        };
        let _ = write!(
            svg,
            r#"<pattern id="{id}-p{s}" width="8" height="8" patternUnits="userSpaceOnUse"><rect width="8" height="8" fill="{colour}"/>{marks}</pattern>"#
        );
    }
    svg.push_str("</defs>");
}

/// The legend: a swatch of each series' pattern and its name, a line each, from `top`.
fn legend(svg: &mut String, id: &str, series: &[String], top: f64) {
    for (s, name) in series.iter().enumerate() {
        let y = top + LINE * s as f64;
        let _ = write!(
            svg,
            r#"<g class="chart-legend"><rect x="{LEFT}" y="{y:.1}" width="24" height="12" fill="url(#{id}-p{s})" stroke="currentColor" stroke-width="0.5"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
            LEFT + 30.0,
            y + 10.0,
            escape(name)
        );
    }
}

/// The step between ticks and the top tick for values up to `highest`: a step of 1, 2 or 5
/// times a power of ten, about four of them.
fn ticks(highest: u128) -> (u128, u128) {
    let want = highest.div_ceil(4).max(1);
    let mut power = 1u128;
    loop {
        for m in [1, 2, 5] {
            let step = power * m;
            if step >= want {
                return (step, step * highest.div_ceil(step).max(1));
            }
        }
        power *= 10;
    }
}

/// `n` in a few characters: `950`, `1.5k`, `12M`, `3G`.
fn short(n: u128) -> String {
    const UNITS: [(u128, &str); 6] = [
        (1_000_000_000_000_000_000, "E"),
        (1_000_000_000_000_000, "P"),
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "k"),
    ];
    for (unit, suffix) in UNITS {
        if n >= unit {
            let tenths = n / (unit / 10);
            return if tenths.is_multiple_of(10) || tenths >= 100 {
                format!("{}{suffix}", tenths / 10)
            } else {
                format!("{}.{}{suffix}", tenths / 10, tenths % 10)
            };
        }
    }
    n.to_string()
}

/// Billionths of a currency in a few characters: `0.05`, `2.5`, `1.5k` (whole units past
/// 1 000).
fn money(billionths: u128) -> String {
    let whole = billionths / 1_000_000_000;
    match whole >= 1000 {
        true => short(whole),
        false => figures::amount(billionths),
    }
}

/// `text` with what XML does not allow in a document (control characters, U+FFFE, U+FFFF)
/// made spaces: the page parses each chart as XML.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// A name as a chart shows it: on one line, XML-safe, at most [`NAME_CHARS`] characters.
fn label(name: &str) -> String {
    let text = xml_text(name);
    match text.char_indices().nth(NAME_CHARS - 1) {
        Some((at, _)) if text[at..].chars().count() > 1 => format!("{}…", &text[..at]),
        _ => text,
    }
}

#[cfg(test)]
#[path = "charts_tests.rs"]
mod tests;
