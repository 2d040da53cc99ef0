//! Wall-clock time as rules see it: `now` is milliseconds since the Unix epoch (UTC).
//!
//! [`parse_rfc3339`] reads the times people write (`--now`, a rule test's `given.now`, the
//! admin API's `"now"`), [`format_rfc3339`] writes one back, and [`hour_of_day`] and
//! [`day_of_week`] are the helpers rule expressions call, at a fixed UTC offset in whole hours.
//! The calendar is the proleptic Gregorian one, without leap seconds, as Unix time counts.

use std::fmt;

const MS_PER_HOUR: i64 = 3_600_000;
const MS_PER_DAY: i64 = 24 * MS_PER_HOUR;
/// The widest UTC offset the helpers take, in hours either way.
pub const MAX_OFFSET_HOURS: i64 = 24;

/// Why a text is not an RFC 3339 time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{text}' is not an RFC 3339 time like 2026-01-01T09:30:00Z or 2026-01-01T10:30:00+01:00: {why}"
)]
pub struct WallTimeError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Milliseconds since the Unix epoch of an RFC 3339 time such as `2026-01-01T00:00:00Z`,
/// `2026-01-01T08:00:00.250+01:00` or `2026-01-01 07:00:00z`. Fractions beyond milliseconds
/// are cut off; a time before the epoch is an error.
///
/// ```
/// use rebound_engine::wall_time::parse_rfc3339;
///
/// assert_eq!(parse_rfc3339("1970-01-01T00:00:01.5Z"), Ok(1_500));
/// assert_eq!(parse_rfc3339("2026-01-01T01:00:00+01:00"), parse_rfc3339("2026-01-01T00:00:00Z"));
/// assert!(parse_rfc3339("2026-02-30T00:00:00Z").is_err());
/// ```
pub fn parse_rfc3339(text: &str) -> Result<u64, WallTimeError> {
    let fail = |why| WallTimeError {
        text: text.to_string(),
        why,
    };
    let b = text.as_bytes();
    if b.len() < 20 {
        return Err(fail("too short"));
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0i64, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let at = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt ") && at(13, b":") && at(16, b":")) {
        return Err(fail("expected YYYY-MM-DDTHH:MM:SS"));
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        num(0, 4),
        num(5, 2),
        num(8, 2),
        num(11, 2),
        num(14, 2),
        num(17, 2),
    ) else {
        return Err(fail("expected digits in YYYY-MM-DDTHH:MM:SS"));
    };
    if !(1..=12).contains(&month) {
        return Err(fail("the month must be 01 to 12"));
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err(fail("no such day in that month"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(fail("the time of day is out of range"));
    }
    let mut i = 19;
    let mut millis = 0;
    if at(i, b".") {
        i += 1;
        let start = i;
        while at(i, b"0123456789") {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return Err(fail("expected digits after the '.'"));
        }
        for _ in (i - start)..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && at(i + 3, b":") => {
            let (Some(h), Some(m)) = (num(i + 1, 2), num(i + 4, 2)) else {
                return Err(fail("expected a UTC offset like +01:00"));
            };
            if h > 23 || m > 59 {
                return Err(fail("the UTC offset is out of range"));
            }
            let minutes = h * 60 + m;
            if sign == b'-' { -minutes } else { minutes }
        }
        _ => return Err(fail("expected 'Z' or a UTC offset like +01:00 at the end")),
    };
    let days = days_from_civil(year, month, day);
    // A leap second (:60) counts as the first moment of the next minute, as Unix time has it.
    let ms = days * MS_PER_DAY
        + hour * MS_PER_HOUR
        + (minute - offset_minutes) * 60_000
        + second * 1_000
        + millis;
    u64::try_from(ms).map_err(|_| fail("it is before 1970-01-01T00:00:00Z"))
}

/// `ms` since the epoch as RFC 3339 in UTC with milliseconds (`2026-01-01T00:00:00.000Z`).
///
/// ```
/// use rebound_engine::wall_time::format_rfc3339;
///
/// assert_eq!(format_rfc3339(1_767_225_600_250), "2026-01-01T00:00:00.250Z");
/// ```
pub fn format_rfc3339(ms: u64) -> String {
    Rfc3339(ms).to_string()
}

/// The system's wall time, in ms since the epoch: the `now` of a failure that happens as it is
/// decided (`rebound decide` without `--now`, the admin API without `"now"`). Rule
/// expressions never read a clock; they see the `now` their caller gives.
pub fn system_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Displays `ms` since the epoch as [`format_rfc3339`] does, without building a string first.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub u64);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = i64::try_from(self.0).unwrap_or(i64::MAX);
        let (days, in_day) = (ms.div_euclid(MS_PER_DAY), ms.rem_euclid(MS_PER_DAY));
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
            in_day / MS_PER_HOUR,
            in_day / 60_000 % 60,
            in_day / 1_000 % 60,
            in_day % 1_000
        )
    }
}

/// Why a helper refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the UTC offset must be whole hours from -{MAX_OFFSET_HOURS} to {MAX_OFFSET_HOURS}, not {0}"
)]
pub struct OffsetError(pub i64);

/// The hour of the day (0–23) at `now` (ms since the epoch) in the zone `offset_hours` from
/// UTC: `hour_of_day(now, 1)` is the hour in Paris in winter.
///
/// ```
/// use rebound_engine::wall_time::hour_of_day;
///
/// let eight_utc = 8 * 3_600_000;
/// assert_eq!(hour_of_day(eight_utc, 1), Ok(9));
/// assert_eq!(hour_of_day(eight_utc, -9), Ok(23));
/// ```
pub fn hour_of_day(now: i64, offset_hours: i64) -> Result<i64, OffsetError> {
    Ok(local(now, offset_hours)?.rem_euclid(MS_PER_DAY) / MS_PER_HOUR)
}

/// The day of the week at `now` (ms since the epoch) in the zone `offset_hours` from UTC:
/// 1 for Monday through 7 for Sunday (ISO 8601).
///
/// ```
/// use rebound_engine::wall_time::day_of_week;
///
/// // 1970-01-01 was a Thursday.
/// assert_eq!(day_of_week(0, 0), Ok(4));
/// assert_eq!(day_of_week(0, -1), Ok(3));
/// ```
pub fn day_of_week(now: i64, offset_hours: i64) -> Result<i64, OffsetError> {
    let days = local(now, offset_hours)?.div_euclid(MS_PER_DAY);
    // Day 0 was a Thursday, the 4th day of the ISO week.
    Ok((days + 3).rem_euclid(7) + 1)
}

/// `now` moved by the offset, in ms; saturating, since `now` may be any integer a script made.
fn local(now: i64, offset_hours: i64) -> Result<i64, OffsetError> {
    if offset_hours.abs() > MAX_OFFSET_HOURS {
        return Err(OffsetError(offset_hours));
    }
    Ok(now.saturating_add(offset_hours * MS_PER_HOUR))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The Gregorian date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        parse_rfc3339(text).unwrap() as i64
    }

    #[test]
    fn rfc3339_times_parse_with_their_offsets_and_fractions() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(at("2026-01-01T00:00:00Z"), 1_767_225_600_000);
        assert_eq!(at("2026-01-01T00:00:00.123456Z"), 1_767_225_600_123);
        assert_eq!(at("2026-01-01T00:00:00.1Z"), 1_767_225_600_100);
        assert_eq!(at("2026-01-01T09:00:00+09:00"), 1_767_225_600_000);
        assert_eq!(at("2025-12-31T19:00:00-05:00"), 1_767_225_600_000);
        assert_eq!(at("2026-01-01t00:00:00z"), at("2026-01-01 00:00:00Z"));
        assert_eq!(
            at("2024-02-29T00:00:00Z"),
            at("2024-02-28T00:00:00Z") + MS_PER_DAY
        );
        assert_eq!(at("2026-06-30T23:59:60Z"), at("2026-07-01T00:00:00Z"));
        for bad in [
            "",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00Zjunk",
            "1969-12-31T23:59:59Z",
            "2026/01/01T00:00:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
        let err = parse_rfc3339("tomorrow at noon").unwrap_err().to_string();
        assert!(
            err.contains("'tomorrow at noon' is not an RFC 3339 time"),
            "{err}"
        );
    }

    #[test]
    fn times_format_back_to_what_they_parse_from() {
        for text in [
            "1970-01-01T00:00:00.000Z",
            "2000-02-29T23:59:59.999Z",
            "2026-01-01T00:00:00.000Z",
            "2100-03-01T12:34:56.789Z",
        ] {
            assert_eq!(format_rfc3339(parse_rfc3339(text).unwrap()), text);
        }
    }

    #[test]
    fn the_hour_of_day_follows_the_offset_across_midnight() {
        let t = at("2026-01-01T08:30:00Z");
        assert_eq!(hour_of_day(t, 0), Ok(8));
        assert_eq!(hour_of_day(t, 1), Ok(9));
        assert_eq!(hour_of_day(t, 15), Ok(23));
        assert_eq!(hour_of_day(t, 16), Ok(0));
        assert_eq!(hour_of_day(t, -8), Ok(0));
        assert_eq!(hour_of_day(t, -9), Ok(23));
        let midnight = at("2026-01-01T00:00:00Z");
        assert_eq!(hour_of_day(midnight, 0), Ok(0));
        assert_eq!(hour_of_day(midnight - 1, 0), Ok(23));
        assert_eq!(hour_of_day(0, -5), Ok(19));
        assert_eq!(hour_of_day(t, 25), Err(OffsetError(25)));
        assert_eq!(hour_of_day(t, -25), Err(OffsetError(-25)));
        assert_eq!(
            hour_of_day(i64::MAX, 24).map(|h| (0..24).contains(&h)),
            Ok(true)
        );
    }

    #[test]
    fn the_day_of_week_runs_monday_1_to_sunday_7_and_turns_at_local_midnight() {
        // 2026-01-01 is a Thursday; 2026-01-04 a Sunday; 2026-01-05 a Monday.
        assert_eq!(day_of_week(at("2026-01-01T12:00:00Z"), 0), Ok(4));
        assert_eq!(day_of_week(at("2026-01-04T12:00:00Z"), 0), Ok(7));
        assert_eq!(day_of_week(at("2026-01-05T00:00:00Z"), 0), Ok(1));
        assert_eq!(day_of_week(at("2026-01-05T00:00:00Z") - 1, 0), Ok(7));
        // Sunday 23:30 UTC is already Monday at +1, and still Sunday at -1.
        let late_sunday = at("2026-01-04T23:30:00Z");
        assert_eq!(day_of_week(late_sunday, 1), Ok(1));
        assert_eq!(day_of_week(late_sunday, -1), Ok(7));
        // Monday 00:30 UTC is still Sunday at -1.
        assert_eq!(day_of_week(at("2026-01-05T00:30:00Z"), -1), Ok(7));
        assert_eq!(day_of_week(0, 0), Ok(4));
        assert_eq!(day_of_week(-1, 0), Ok(3));
        assert_eq!(day_of_week(0, 99), Err(OffsetError(99)));
    }
}
