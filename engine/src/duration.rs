//! Durations as rule files write them: `250ms`, `1s`, `1.5s`, `2m`, `1h`, `1h30m`, or a bare
//! integer meaning milliseconds.
//!
//! Rebound works in whole milliseconds: a decision's delay is reported as `delay_ms`, so a
//! duration finer than a millisecond is rejected rather than silently rounded.

use std::fmt;
use std::time::Duration;

/// Why a duration string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad duration '{input}': {why}; expected e.g. '250ms', '1.5s', '2m', '1h30m' or a bare number of milliseconds"
)]
pub struct DurationError {
    /// What the user wrote.
    pub input: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Milliseconds per unit, longest unit names first so `ms` wins over `m`.
const UNITS: [(&str, u128); 5] = [
    ("ms", 1),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("d", 86_400_000),
];

/// Parses a duration such as `1h30m`, `1.5s` or `250` (milliseconds).
///
/// ```
/// use std::time::Duration;
/// use rebound_engine::duration::parse_duration;
/// assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
/// assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
/// assert_eq!(parse_duration("250").unwrap(), Duration::from_millis(250));
/// assert!(parse_duration("5 parsecs").is_err());
/// ```
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        input: input.to_string(),
        why,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("it is empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let ms: u64 = s.parse().map_err(|_| err("the number is too large"))?;
        return Ok(Duration::from_millis(ms));
    }
    // Total in millionths of a millisecond (nanoseconds) so `1.5s` stays exact.
    let mut total_ns: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("a number needs a unit (ms, s, m, h, d)"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let (number, after) = rest.split_at(num_len);
        let (unit_ms, unit_len) = UNITS
            .iter()
            .find(|(name, _)| after.starts_with(name))
            .map(|(name, ms)| (*ms, name.len()))
            .ok_or_else(|| err("unknown unit (use ms, s, m, h or d)"))?;
        total_ns = total_ns
            .checked_add(
                number_times(number, unit_ms * 1_000_000).ok_or_else(|| err("bad number"))?,
            )
            .ok_or_else(|| err("it is too large"))?;
        rest = &after[unit_len..];
    }
    if !total_ns.is_multiple_of(1_000_000) {
        return Err(err("it is finer than a millisecond"));
    }
    let ms = u64::try_from(total_ns / 1_000_000).map_err(|_| err("it is too large"))?;
    Ok(Duration::from_millis(ms))
}

/// `number` (digits with at most one `.`) times `scale`, exactly, in integers.
fn number_times(number: &str, scale: u128) -> Option<u128> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut value = int.checked_mul(scale)?;
    let mut place = scale;
    for digit in frac.bytes() {
        place /= 10;
        let d = u128::from(digit - b'0');
        if place == 0 {
            if d != 0 {
                return Some(value + 1); // below a nanosecond: marks it as not whole
            }
            continue;
        }
        value = value.checked_add(d * place)?;
    }
    Some(value)
}

/// Formats a duration the way rule files write it: `1h30m`, `1.5s`, `250ms`, `0ms`.
pub fn format_duration(d: Duration) -> String {
    DurationDisplay(d).to_string()
}

/// A `Display` wrapper for [`format_duration`].
#[derive(Debug, Clone, Copy)]
pub struct DurationDisplay(pub Duration);

impl fmt::Display for DurationDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0ms");
        }
        if ms < 1_000 {
            return write!(f, "{ms}ms");
        }
        if ms < 60_000 {
            let (s, rest) = (ms / 1_000, ms % 1_000);
            return if rest == 0 {
                write!(f, "{s}s")
            } else {
                let frac = format!("{rest:03}");
                write!(f, "{s}.{}s", frac.trim_end_matches('0'))
            };
        }
        let mut rest = ms;
        for (unit, size) in [
            ("d", 86_400_000u128),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
        ] {
            if rest >= size {
                write!(f, "{}{unit}", rest / size)?;
                rest %= size;
            }
        }
        if rest > 0 {
            write!(f, "{rest}ms")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_every_documented_form() {
        assert_eq!(parse_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_duration("1s"), Ok(ms(1_000)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1_500)));
        assert_eq!(parse_duration("2m"), Ok(ms(120_000)));
        assert_eq!(parse_duration("1h"), Ok(ms(3_600_000)));
        assert_eq!(parse_duration("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parse_duration("100"), Ok(ms(100)));
        assert_eq!(parse_duration("0"), Ok(ms(0)));
        assert_eq!(parse_duration(".5s"), Ok(ms(500)));
    }

    #[test]
    fn rejects_nonsense_with_a_reason() {
        for bad in [
            "",
            "s",
            "1x",
            "1.2.3s",
            "10 apples",
            "1.0001s",
            "-1s",
            "99999999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} should not parse");
        }
        let e = parse_duration("5y").unwrap_err();
        assert!(e.to_string().contains("unknown unit"), "{e}");
    }

    #[test]
    fn formats_round_trip() {
        for s in ["250ms", "1s", "1.5s", "2m", "1h", "1h30m", "0ms", "1m0s5ms"] {
            let d = parse_duration(s).unwrap();
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d, "{s}");
        }
        assert_eq!(format_duration(ms(5_400_000)), "1h30m");
        assert_eq!(format_duration(ms(1_500)), "1.5s");
    }
}
