//! The retry paths as people and spreadsheets read them: each path's end in one sentence,
//! the text table (`rebound paths`) and its CSV (`--csv`).

use super::{PathTable, RedriveLeg, RetryPath, RetryRow};
use crate::duration::DurationDisplay;
use std::fmt::{self, Write as _};
use std::time::Duration;

fn range_text(lo: u64, hi: u64) -> String {
    let d = |v| DurationDisplay(Duration::from_millis(v));
    if lo == hi {
        d(lo).to_string()
    } else {
        format!("{}–{}", d(lo), d(hi))
    }
}

impl RetryPath {
    /// One sentence: where the path ends.
    pub fn end_text(&self) -> String {
        let e = &self.end;
        if self.give_up {
            return format!("{} at once (give_up)", e.dead_letter);
        }
        let plural = |n: u32| if n == 1 { "retry" } else { "retries" };
        let best = format!("{} {}", e.retries, plural(e.retries));
        let w = e.worst_case;
        if (w.reason, w.retries) == (e.reason, e.retries) {
            return format!("{} after {best} ({})", e.dead_letter, e.reason);
        }
        format!(
            "{} after {best} ({}) when delays are short; after {} {} ({}) when they are long",
            e.dead_letter,
            e.reason,
            w.retries,
            plural(w.retries),
            w.reason
        )
    }
}

/// The table for people.
impl fmt::Display for PathTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Retry paths of rule set {}", self.version)?;
        writeln!(f, "Note: {}.", self.sample_context)?;
        for p in &self.paths {
            writeln!(f)?;
            match &p.at {
                Some(at) => writeln!(f, "{}  ({at})", p.rule)?,
                None => writeln!(f, "{}", p.rule)?,
            }
            if let (Some(b), Some(m)) = (&p.backoff, p.max_retries) {
                let elapsed = p
                    .max_elapsed_ms
                    .map(|l| {
                        format!(
                            ", max_elapsed {}",
                            DurationDisplay(Duration::from_millis(l))
                        )
                    })
                    .unwrap_or_default();
                writeln!(f, "  {b}; max_retries {m}{elapsed}")?;
            }
            for n in &p.notes {
                writeln!(f, "  note: {n}")?;
            }
            let mut header = false;
            rows(f, &p.retries, &mut header)?;
            writeln!(f, "  ends: {}", p.end_text())?;
            for leg in &p.redrives {
                writeln!(
                    f,
                    "  redrive {}/{} after {}: replayed as a first delivery (attempts from 1 again)",
                    leg.redrive,
                    leg.of,
                    DurationDisplay(Duration::from_millis(leg.after_ms))
                )?;
                rows(f, &leg.retries, &mut header)?;
                writeln!(f, "  ends: {}", leg_end_text(p, leg))?;
            }
            if let (Some(total), Some(last)) = (p.total_worst_ms, p.redrives.last()) {
                writeln!(
                    f,
                    "  worst-case total with {} {}: {}",
                    last.redrive,
                    if last.redrive == 1 {
                        "redrive"
                    } else {
                        "redrives"
                    },
                    DurationDisplay(Duration::from_millis(total))
                )?;
            }
        }
        Ok(())
    }
}

/// The rows of one pass of a path, under the column header (written once per path, before
/// its first row).
fn rows(f: &mut fmt::Formatter<'_>, retries: &[RetryRow], header: &mut bool) -> fmt::Result {
    if !retries.is_empty() && !*header {
        *header = true;
        writeln!(
            f,
            "  {:>5}  {:<16}  {:>12}  {:>12}",
            "retry", "delay", "total best", "total worst"
        )?;
    }
    for r in retries {
        let d = |v| DurationDisplay(Duration::from_millis(v)).to_string();
        let only = if r.in_worst_case {
            ""
        } else {
            "  (only when delays are short)"
        };
        writeln!(
            f,
            "  {:>5}  {:<16}  {:>12}  {:>12}{only}",
            r.retry,
            range_text(r.delay_min_ms, r.delay_max_ms),
            d(r.total_best_ms),
            d(r.total_worst_ms)
        )?;
    }
    Ok(())
}

/// Where a replay ends: as its path does, and for the last one, that no redrive is left.
fn leg_end_text(p: &RetryPath, leg: &RedriveLeg) -> String {
    let end = p.end_text();
    if leg.redrive == leg.of {
        format!("{end}; no redrive left, the letter stays")
    } else {
        end
    }
}

/// A CSV field, quoted when it needs to be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl PathTable {
    /// The table as CSV for a spreadsheet: a header, then one row per retry of each rule (a
    /// `give_up` rule gets one row with an empty retry), each carrying the rule's id and
    /// where its path ends.
    ///
    /// When a path's label redrives, every row gets one more column, `redrive`: 0 for the
    /// path itself, n for the rows of its n-th replay (a set without redrives keeps the
    /// columns it always had).
    pub fn to_csv(&self) -> String {
        let redrives = self.paths.iter().any(|p| !p.redrives.is_empty());
        let mut out = String::from(
            "rule,retry,delay,delay_min_ms,delay_max_ms,total_best_ms,total_worst_ms,in_worst_case,dead_letter,end_reason,end_retries,worst_case_end_reason,worst_case_end_retries",
        );
        out.push_str(if redrives { ",redrive\n" } else { "\n" });
        for p in &self.paths {
            let e = &p.end;
            let tail = [
                csv_field(&e.dead_letter),
                e.reason.to_string(),
                e.retries.to_string(),
                e.worst_case.reason.to_string(),
                e.worst_case.retries.to_string(),
            ]
            .join(",");
            let rule = csv_field(&p.rule);
            let passes = std::iter::once((0, &p.retries, 0, 0)).chain(
                p.redrives
                    .iter()
                    .map(|l| (l.redrive, &l.retries, l.start_best_ms, l.start_worst_ms)),
            );
            for (n, retries, best, worst) in passes {
                let tail = if redrives {
                    format!("{tail},{n}")
                } else {
                    tail.clone()
                };
                if retries.is_empty() {
                    let _ = writeln!(out, "{rule},,,,,{best},{worst},,{tail}");
                }
                for r in retries {
                    let _ = writeln!(
                        out,
                        "{rule},{},{},{},{},{},{},{},{tail}",
                        r.retry,
                        csv_field(&range_text(r.delay_min_ms, r.delay_max_ms)),
                        r.delay_min_ms,
                        r.delay_max_ms,
                        r.total_best_ms,
                        r.total_worst_ms,
                        r.in_worst_case
                    );
                }
            }
        }
        out
    }
}
