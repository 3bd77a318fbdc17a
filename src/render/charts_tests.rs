//! The charts' tests: each chart's bars, their titles and scale, and what hostile figures make
//! of them.

use super::*;

fn daily(day: &str, by: &'static str, name: &str, input: u64, output: u64) -> Daily {
    Daily {
        day: day.into(),
        by,
        name: name.into(),
        sessions: 1,
        turns: 2,
        input_tokens: input,
        output_tokens: output,
        cost: vec![],
    }
}

/// The `<title>`s of a chart's bars.
fn titles(svg: &str) -> Vec<&str> {
    svg.split(r#"<rect class="chart-bar""#)
        .skip(1)
        .map(|bar| {
            let from = bar.find("<title>").unwrap() + "<title>".len();
            &bar[from..from + bar[from..].find("</title>").unwrap()]
        })
        .collect()
}

fn attr(bar: &str, name: &str) -> f64 {
    let from = bar.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
    bar[from..from + bar[from..].find('"').unwrap()]
        .parse()
        .unwrap()
}

#[test]
fn a_tokens_chart_stacks_each_day_s_bars_to_scale_with_their_numbers() {
    let rows = [
        daily("2026-11-28", "agent", "claude", 300, 100),
        daily("2026-11-28", "agent", "codex", 100, 0),
        daily("2026-11-30", "agent", "claude", 1000, 0),
        daily("2026-11-30", "host", "h1", 1, 1),
    ];
    let svg = tokens_by_day(&rows, "agent");
    assert_eq!(
        titles(&svg),
        [
            "2026-11-28 · claude\n300 input and 100 output tokens, 2 turns, 1 sessions",
            "2026-11-28 · codex\n100 input and 0 output tokens, 2 turns, 1 sessions",
            "2026-11-30 · claude\n1000 input and 0 output tokens, 2 turns, 1 sessions",
        ]
    );
    // Three days (the one between drawn empty); ticks of 500 to 1000.
    let bars: Vec<&str> = svg.split(r#"<rect class="chart-bar""#).skip(1).collect();
    let height = |i: usize| attr(bars[i], "height");
    assert!((height(2) - PLOT).abs() < 0.01, "{svg}");
    assert!((height(0) - PLOT * 0.4).abs() < 0.01, "{svg}");
    assert!((height(1) - PLOT * 0.1).abs() < 0.01, "{svg}");
    // codex stacked on claude.
    assert!((attr(bars[1], "y") + height(1) - attr(bars[0], "y")).abs() < 0.01);
    let slot = (RIGHT - LEFT) / 3.0;
    assert!((attr(bars[2], "x") - attr(bars[0], "x") - 2.0 * slot).abs() < 0.01);
    for text in [
        ">500<",
        ">1k<",
        ">11-29<",
        "UTC days, 2026-11-28 to 2026-11-30",
    ] {
        assert!(svg.contains(text), "{text}: {svg}");
    }
    // The legend names each series beside its pattern.
    assert!(svg.contains(r#"fill="url(#tokens-agent-p1)""#), "{svg}");
    assert!(svg.contains(">codex</text>"), "{svg}");
    assert!(!svg.contains("NaN") && !svg.contains(">h1<"), "{svg}");
}

#[test]
fn hostile_names_are_escaped_cut_and_kept_to_what_xml_allows() {
    let hostile = "<script>alert(1)</script>\"&'\u{1}\u{FFFF}".repeat(3);
    let svg = tokens_by_day(&[daily("2026-11-28", "host", &hostile, 1, 1)], "host");
    assert!(!svg.contains("<script") && !svg.contains('\u{1}') && !svg.contains('\u{FFFF}'));
    assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;&#39;"));
    assert!(svg.contains("…</text>"), "{svg}");
    let costly = Costly {
        session: "s\"><script>".into(),
        title: Some(hostile.clone()),
        agent: "<b>".into(),
        turns: 1,
        input_tokens: 5,
        output_tokens: 5,
        cost: vec![],
    };
    let svg = costliest(&[costly]);
    assert!(
        svg.contains(r#"data-session="s&quot;&gt;&lt;script&gt;""#),
        "{svg}"
    );
    assert!(!svg.contains("<script") && !svg.contains("<b>"), "{svg}");
    let svg = stop_reasons(&[Stop {
        reason: hostile,
        turns: 3,
    }]);
    assert!(!svg.contains("<script"), "{svg}");
    assert!(svg.contains(": 3 turns</title>"), "{svg}");
}

#[test]
fn nothing_to_draw_says_so_and_huge_numbers_neither_overflow_nor_make_nan() {
    for svg in [
        tokens_by_day(&[], "agent"),
        tokens_by_day(&[daily("?", "agent", "a", 1, 1)], "agent"),
        activity(&[]),
        costliest(&[]),
        stop_reasons(&[]),
    ] {
        assert!(svg.contains("no usage yet"), "{svg}");
        assert!(!svg.contains("NaN"), "{svg}");
    }
    let huge: Vec<Daily> = (0..20)
        .map(|i| daily("2026-11-28", "agent", &format!("a{i}"), u64::MAX, u64::MAX))
        .collect();
    let svg = tokens_by_day(&huge, "agent");
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    assert!(svg.contains("others (13 agents)"), "{svg}");
    // Eight series: seven and the others, whose title sums theirs.
    assert_eq!(titles(&svg).len(), MAX_SERIES);
    let others = u128::from(u64::MAX) * 13;
    assert!(svg.contains(&format!("{others} input")), "{svg}");
    let svg = stop_reasons(&[Stop {
        reason: "end_turn".into(),
        turns: u64::MAX,
    }]);
    assert!(svg.contains(&format!(">{}<", u64::MAX)), "{svg}");
    assert_eq!(ticks(u128::from(u64::MAX) * 40).0 % 10, 0);
    assert_eq!(short(1_500), "1.5k");
    assert_eq!(short(2_000_000), "2M");
    assert_eq!(short(u128::from(u64::MAX)), "18E");
}

#[test]
fn a_long_span_shows_its_last_days_and_says_so() {
    let rows: Vec<Activity> = (0..90)
        .map(|i| Activity {
            day: Date::new(2026, 1, 1)
                .unwrap()
                .checked_add(i.days())
                .unwrap()
                .to_string(),
            sessions: 1,
            turns: 3,
        })
        .collect();
    let svg = activity(&rows);
    // Two bars a day (sessions and turns), of the last 60 days.
    assert_eq!(titles(&svg).len(), MAX_DAYS * 2);
    assert!(titles(&svg)[0].starts_with("2026-01-31\n1 sessions, 3 turns"));
    assert!(
        svg.contains("the last 60 of the 90 days the figures hold"),
        "{svg}"
    );
}

/// A cost of `billionths` of `currency` over `turns` turns.
fn cost(currency: &str, billionths: u128, turns: u64) -> figures::Cost {
    figures::Cost {
        currency: currency.into(),
        amount: figures::amount(billionths),
        turns,
        billionths,
    }
}

fn costing(mut d: Daily, costs: &[figures::Cost]) -> Daily {
    d.cost = costs.to_vec();
    d
}

#[test]
fn a_cost_chart_per_currency_stacks_each_day_s_bars_with_their_amounts() {
    let rows = [
        costing(
            daily("2026-11-28", "agent", "claude", 1, 1),
            &[cost("USD", 750_000_000, 2), cost("EUR", 2_000_000_000, 1)],
        ),
        costing(
            daily("2026-11-28", "agent", "codex", 1, 1),
            &[cost("USD", 250_000_000, 1)],
        ),
        // No cost reported that day: no bar.
        daily("2026-11-29", "agent", "codex", 1, 1),
        costing(
            daily("2026-11-30", "agent", "claude", 1, 1),
            &[cost("USD", 1_000_000_000, 1)],
        ),
        costing(
            daily("2026-11-30", "host", "h1", 1, 1),
            &[cost("GBP", 1, 1)],
        ),
    ];
    let charts = cost_by_day(&rows, "agent");
    assert_eq!(charts.len(), 2, "USD (3 turns), then EUR (1): {charts:?}");
    let usd = &charts[0];
    assert!(
        usd.contains(r#"aria-label="Cost per day by agent, in USD""#),
        "{usd}"
    );
    assert_eq!(
        titles(usd),
        [
            "2026-11-28 · claude\n0.75 USD, 2 turns, 1 sessions",
            "2026-11-28 · codex\n0.25 USD, 1 turns, 1 sessions",
            "2026-11-30 · claude\n1 USD, 1 turns, 1 sessions",
        ]
    );
    // To scale: the first day's stack as high as the last day's bar.
    let bars: Vec<&str> = usd.split(r#"<rect class="chart-bar""#).skip(1).collect();
    let height = |i: usize| attr(bars[i], "height");
    assert!((height(0) + height(1) - height(2)).abs() < 0.01, "{usd}");
    assert!((height(0) - 3.0 * height(1)).abs() < 0.01, "{usd}");
    // Ticks in the currency's units; the legend in text.
    assert!(usd.contains(">0.5<") && usd.contains(">1<"), "{usd}");
    assert!(
        usd.contains(">USD</text>") && usd.contains(">codex</text>"),
        "{usd}"
    );
    assert_eq!(
        titles(&charts[1]),
        ["2026-11-28 · claude\n2 EUR, 1 turns, 1 sessions"]
    );
    assert_ne!(charts[0].find("cost-agent-0-p0"), None);
    assert_ne!(
        charts[1].find("cost-agent-1-p0"),
        None,
        "ids unique on the page"
    );
    assert!(!usd.contains("GBP") && !usd.contains("NaN"), "{usd}");
    assert_eq!(
        titles(&cost_by_day(&rows, "host")[0]),
        ["2026-11-30 · h1\n0.000000001 GBP, 1 turns, 1 sessions"]
    );
}

#[test]
fn cost_charts_say_when_there_is_none_or_more_currencies_than_drawn_and_escape_them() {
    let none = cost_by_day(&[daily("2026-11-28", "agent", "a", 1, 1)], "agent");
    assert_eq!(none.len(), 1);
    assert!(none[0].contains("no cost reported"), "{none:?}");
    let many: Vec<Daily> = (0..7)
        .map(|i| {
            let currency = format!("<c{i}>&\u{1}");
            costing(
                daily("2026-11-28", "host", "h", 1, 1),
                &[cost(&currency, u128::MAX, 1)],
            )
        })
        .collect();
    let charts = cost_by_day(&many, "host");
    assert_eq!(charts.len(), MAX_CURRENCIES + 1);
    assert!(
        charts[MAX_CURRENCIES].contains("and 3 more currencies"),
        "{charts:?}"
    );
    for svg in &charts {
        assert!(!svg.contains("<c") && !svg.contains('\u{1}'), "{svg}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }
    assert!(charts[0].contains("&lt;c0&gt;&amp; "), "{}", charts[0]);
    // A huge amount: its bar held, its title whole; ticks in whole units, shortened.
    let whole = figures::amount(u128::MAX);
    assert!(charts[0].contains(&format!("\n{whole} ")), "{}", charts[0]);
    assert!(charts[0].contains(">20G<"), "{}", charts[0]);
    assert_eq!(money(u128::MAX), short(u128::MAX / 1_000_000_000));
    assert_eq!(money(50_000_000), "0.05");
    assert_eq!(money(1_500_000_000_000), "1.5k");
}

#[test]
fn a_costly_session_s_title_says_what_it_cost() {
    let row = Costly {
        session: "s".into(),
        title: None,
        agent: "echo".into(),
        turns: 2,
        input_tokens: 5,
        output_tokens: 1,
        cost: vec![cost("USD", 250_000_000, 2)],
    };
    let svg = costliest(&[row]);
    assert!(
        svg.contains("session s (echo): 5 input and 1 output tokens, 2 turns, 0.25 USD</title>"),
        "{svg}"
    );
}

#[test]
fn the_costliest_sessions_link_to_themselves_most_first() {
    let row = |session: &str, tokens: u64| Costly {
        session: session.into(),
        title: None,
        agent: "echo".into(),
        turns: 2,
        input_tokens: tokens,
        output_tokens: 1,
        cost: vec![],
    };
    let svg = costliest(&[row("big", 99), row("small", 9)]);
    let big = svg.find(r#"data-session="big""#).unwrap();
    assert!(big < svg.find(r#"data-session="small""#).unwrap(), "{svg}");
    assert!(
        svg.contains(">100</text>") && svg.contains(">10</text>"),
        "{svg}"
    );
    assert!(
        svg.contains("session big (echo): 99 input and 1 output tokens, 2 turns"),
        "{svg}"
    );
}
