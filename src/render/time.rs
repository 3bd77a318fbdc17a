//! Journal times (Unix microseconds) written out in UTC: RFC 3339 ([`utc`], [`utc_us`]), to the
//! minute for people ([`minute`]) and a time of day ([`clock`]).

/// A journal time (Unix microseconds) in UTC, RFC 3339 (empty when out of range).
pub fn utc(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A journal time in UTC, RFC 3339 with every microsecond (`2026-11-25T01:27:39.166700Z`: fixed
/// width, so the strings sort as the times do; empty when out of range).
pub fn utc_us(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_default()
}

/// A journal time in UTC to the minute, for people: `2026-12-06 10:02 UTC` (empty when out of
/// range).
pub fn minute(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// A journal time of day in UTC: `HH:MM:SS.mmm`.
pub fn clock(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| t.strftime("%H:%M:%S%.3f").to_string())
        .unwrap_or_default()
}
