//! The values of the command line's flags: each parser clap calls, with the error it says.

use std::time::Duration;

/// The longest duration a flag takes: a day.
const MAX_SECONDS: f64 = 86_400.0;

/// Parse a number of seconds (`5`, `0.5`): finite, from 0 to a day.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(0.0..=MAX_SECONDS).contains(&seconds) {
        return Err(format!("{text:?}: use a number of seconds from 0 to 86400"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parse a timeout in seconds: as [`parse_seconds`], but more than zero.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = parse_seconds(text)?;
    if timeout.is_zero() {
        return Err(format!("{text:?}: a timeout must be more than 0 seconds"));
    }
    Ok(timeout)
}

/// Parse `--share-recheck`: a timeout of at most a minute.
pub fn parse_recheck(text: &str) -> Result<Duration, String> {
    let recheck = parse_timeout(text)?;
    if recheck > Duration::from_secs(60) {
        return Err(format!("{text:?}: a record is trusted at most 60 seconds"));
    }
    Ok(recheck)
}

/// Parse `--ship-interval`: as [`parse_seconds`], at least 0.1 s.
pub fn parse_ship_interval(text: &str) -> Result<Duration, String> {
    let interval = parse_seconds(text)?;
    if interval < Duration::from_millis(100) {
        return Err(format!("{text:?}: ship at most every 0.1 seconds"));
    }
    Ok(interval)
}

/// Parse a size in bytes: a whole number, with an optional `K`, `M` or `G` (1024s; a `B` or
/// `iB` after it is allowed).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{text:?} is not a size (use e.g. 500M or 2G)"))
}

/// Parse an age like `90m`, `12h`, `30d`, `4w` (or seconds with `s`).
pub fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not an age like 30d, 12h or 90m"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" | "" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?}: use s, m, h, d or w"
            ));
        }
    };
    const CENTURY: u64 = 100 * 366 * 86_400;
    n.checked_mul(seconds)
        .filter(|s| *s <= CENTURY)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: an age is at most a century"))
}

/// How fast `replay` plays the agent's messages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// With the recorded delays.
    Recorded,
    /// Without delays.
    Fast,
    /// The recorded delays divided by this factor (`x2`: twice as fast).
    Speed(f64),
}

/// Parse `recorded`, `fast` or `xN`.
pub fn parse_pace(text: &str) -> Result<Pace, String> {
    match text {
        "recorded" => Ok(Pace::Recorded),
        "fast" => Ok(Pace::Fast),
        _ => text
            .strip_prefix('x')
            .and_then(|n| n.parse::<f64>().ok())
            .filter(|n| (0.01..=10_000.0).contains(n))
            .map(Pace::Speed)
            .ok_or_else(|| {
                format!("{text:?}: use recorded, fast, or xN with N from 0.01 to 10000, such as x2 or x0.5")
            }),
    }
}

/// `START,END` for `blame -L`.
pub(super) fn parse_line_range(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("{s:?} is not START,END (line numbers from 1, START <= END)");
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let (a, b): (usize, usize) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a == 0 || b < a {
        return Err(bad());
    }
    Ok((a, b))
}
