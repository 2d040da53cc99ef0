//! The retry path of every rule and of the defaults, as a table (`rebound paths`): for each
//! retry, its delay range over jitter and the cumulative best and worst case, then where the
//! path ends. Rule authors read it to see a policy at a glance; `--csv` hands the same table
//! to a spreadsheet.
//!
//! Each rule is taken on its own, as if it decided every attempt of a failure that takes no
//! time to process (`rebound test` paths show how rules hand over to each other). Delays come
//! from the same functions the decision uses (the backoff's base delay, its jitter range and
//! the `max` clamp). Guards and delay scripts are evaluated on a sample context (biz and code
//! `SAMPLE`, nothing else known), and the table says so ([`PathTable::sample_context`]).
//!
//! "Best case" is every delay at its shortest, "worst case" every delay at its longest. With
//! `max_elapsed` the two can end differently: long delays reach `max_elapsed` sooner.
//!
//! A path whose dead-letter label redrives (`labels:`) goes on through each replay of the
//! letter ([`RetryPath::redrives`], `paths/redrive.rs`), its totals taking in the waits.
//!
//! The same path as a chart ([`RetryPath::to_svg`], `paths/chart.rs`): for `rebound paths
//! --svg`, the admin API's `GET /v1/paths/{rule}.svg` and the console.
//!
//! ```
//! use rebound_engine::{SourceFile, compile, paths::retry_paths};
//! let yaml = "version: 1\nrules:\n  - id: poll\n    retry: { max_retries: 2, backoff: { fixed: 100ms } }\n    dead_letter: L1\n";
//! let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
//! let table = retry_paths(&set);
//! let poll = &table.paths[0];
//! assert_eq!(poll.retries.iter().map(|r| r.total_worst_ms).collect::<Vec<_>>(), [100, 200]);
//! assert_eq!((poll.end.dead_letter.as_str(), poll.end.reason, poll.end.retries), ("L1", "max_retries", 2));
//! ```

use crate::backoff::{Backoff, BackoffKind, Jitter, RetryPolicy};
use crate::context::FailureContext;
use crate::duration::DurationDisplay;
use crate::pattern::Cmp;
use crate::rule::{CompiledRule, Outcome};
use crate::script::ScriptEngine;
use crate::set::CompiledSet;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

mod chart;
mod redrive;
mod render;

pub use redrive::RedriveLeg;

/// The most retries a table lists for one rule.
pub(crate) const MAX_ROWS: u32 = 10_000;

/// How the sample context is described to readers of the table.
pub(crate) const SAMPLE_CONTEXT: &str = "guards and script delays are evaluated on a sample context: biz SAMPLE, code SAMPLE, no attrs, headers, signals or retry_after; attempt, elapsed and last_delay follow the path, with no processing time, and now is the epoch plus elapsed. A failure's retry_after makes a delay longer wherever respect_retry_after is on (the default)";

/// Whether a rule with these `attempt` conditions decides attempt `r` (and so retry `r`).
pub(crate) fn decides_attempt(attempt: &[Cmp<u64>], r: u64) -> bool {
    attempt.iter().all(|c| c.holds(r))
}

/// The smallest attempt in `lo..=hi` that the `attempt` conditions let a rule decide.
///
/// Each condition changes its answer only next to its value, so the first allowed attempt is
/// `lo` or a neighbour of some condition's value.
pub(crate) fn first_decided_attempt(attempt: &[Cmp<u64>], lo: u64, hi: u64) -> Option<u64> {
    let mut points = vec![lo];
    for c in attempt {
        points.extend([
            c.value.saturating_sub(1),
            c.value,
            c.value.saturating_add(1),
        ]);
    }
    points
        .into_iter()
        .filter(|p| (lo..=hi).contains(p) && decides_attempt(attempt, *p))
        .min()
}

/// `>= 5`, or `>= 2 and != 4`: the attempt conditions as the rule author wrote them.
pub(crate) fn describe_attempts(attempt: &[Cmp<u64>]) -> String {
    let list: Vec<String> = attempt.iter().map(ToString::to_string).collect();
    list.join(" and ")
}

/// The retry paths of a whole set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathTable {
    /// The set's version.
    pub version: String,
    /// How guards and scripts were evaluated.
    pub sample_context: &'static str,
    /// One path per rule in set order, then the defaults.
    pub paths: Vec<RetryPath>,
}

/// The retry path of one rule (or of the defaults).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryPath {
    /// The rule's id, or `defaults`.
    pub rule: String,
    /// Where it is written, as `FILE:LINE:COL` (absent for built-in defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// True for a `give_up` rule.
    pub give_up: bool,
    /// The backoff, as a short description (`fixed 100ms`, `exponential 1s ×2 max 1m, jitter full`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// Its `max_retries`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Its `max_elapsed`, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_elapsed_ms: Option<u64>,
    /// One row per retry that can happen.
    pub retries: Vec<RetryRow>,
    /// Where the path ends.
    pub end: PathEnd,
    /// What the reader should know: guards, conditions on attempt or elapsed, scripts.
    pub notes: Vec<String>,
    /// When the label it ends in redrives: each replay of the dead letter, in order
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redrives: Vec<RedriveLeg>,
    /// With redrives: the total delay at the last replay's end when every delay is at its
    /// longest, the `after` waits included, in ms (absent without redrives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_worst_ms: Option<u64>,
}

/// One retry of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RetryRow {
    /// The retry number (1 for the first re-delivery).
    pub retry: u32,
    /// The shortest delay jitter can give (after the `max` clamp), in ms.
    pub delay_min_ms: u64,
    /// The longest delay jitter can give (after the `max` clamp), in ms.
    pub delay_max_ms: u64,
    /// Total delay up to this retry when every delay is at its shortest, in ms.
    pub total_best_ms: u64,
    /// Total delay up to this retry when every delay is at its longest (no more than
    /// `max_elapsed`), in ms.
    pub total_worst_ms: u64,
    /// False when long delays reach `max_elapsed` before this retry: it happens only when
    /// delays are short.
    pub in_worst_case: bool,
}

/// Where a path ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathEnd {
    /// The dead-letter label.
    pub dead_letter: String,
    /// Why, when every delay is at its shortest: `give_up`, `max_retries` or `max_elapsed`
    /// (or `script_error` when the delay script fails on the sample context).
    pub reason: &'static str,
    /// Retries before the dead letter, when every delay is at its shortest.
    pub retries: u32,
    /// The same when every delay is at its longest.
    pub worst_case: EndCase,
}

/// How a path ends in one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EndCase {
    /// Why.
    pub reason: &'static str,
    /// Retries before the dead letter.
    pub retries: u32,
}

/// The retry path of every rule of `set`, then of its defaults.
pub fn retry_paths(set: &CompiledSet) -> PathTable {
    let mut paths: Vec<RetryPath> = set
        .rules
        .iter()
        .map(|rule| rule_path(rule, set.scripts()))
        .collect();
    let d = set.defaults();
    let at = d.file.as_ref().map(|f| match d.pos {
        Some(p) => format!("{f}:{p}"),
        None => f.to_string(),
    });
    let mut defaults = policy_path(
        "defaults",
        at,
        &d.policy,
        d.dead_letter.as_str(),
        set.scripts(),
        &[],
    );
    if d.file.is_none() {
        defaults
            .notes
            .push("no file declares defaults: these are the built-in ones".into());
    }
    paths.push(defaults);
    for path in &mut paths {
        redrive::follow(path, set.labels());
    }
    PathTable {
        version: set.version().to_string(),
        sample_context: SAMPLE_CONTEXT,
        paths,
    }
}

fn rule_path(rule: &CompiledRule, scripts: &ScriptEngine) -> RetryPath {
    let at = Some(rule.at());
    let mut path = match &rule.outcome {
        Outcome::GiveUp => RetryPath {
            rule: rule.id.to_string(),
            at,
            give_up: true,
            backoff: None,
            max_retries: None,
            max_elapsed_ms: None,
            retries: Vec::new(),
            end: PathEnd {
                dead_letter: rule.dead_letter.to_string(),
                reason: "give_up",
                retries: 0,
                worst_case: EndCase {
                    reason: "give_up",
                    retries: 0,
                },
            },
            notes: Vec::new(),
            redrives: Vec::new(),
            total_worst_ms: None,
        },
        Outcome::Retry(policy) => policy_path(
            rule.id.as_str(),
            at,
            policy,
            rule.dead_letter.as_str(),
            scripts,
            &rule.conditions.attempt,
        ),
    };
    let c = &rule.conditions;
    if !c.attempt.is_empty() {
        path.notes.insert(
            0,
            format!(
                "decides only attempts {}; other attempts go to later rules or the defaults",
                describe_attempts(&c.attempt)
            ),
        );
    }
    if !c.elapsed.is_empty() {
        let list: Vec<String> = c.elapsed.iter().map(ToString::to_string).collect();
        path.notes.push(format!(
            "decides only while elapsed is {}; other failures go to later rules or the defaults",
            list.join(" and ")
        ));
    }
    if let Some(guard) = &rule.guard {
        let sample = FailureContext::sample();
        let value = match scripts.guard(guard, &sample) {
            Ok(v) => v.to_string(),
            Err(e) => format!("an error ({e})"),
        };
        path.notes.push(format!(
            "its guard 'if: {}' is {value} on the sample context; the table shows the path when it decides",
            guard.source()
        ));
    }
    path
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The delay range of retry `r` on one chain (best or worst), with the `max` clamp.
fn range_at(
    backoff: &Backoff,
    r: u32,
    elapsed_ms: u64,
    last_ms: u64,
    scripts: &ScriptEngine,
) -> Result<(u64, u64), String> {
    let ctx = FailureContext {
        elapsed: Duration::from_millis(elapsed_ms),
        last_delay: Duration::from_millis(last_ms),
        // The sample's `now` (the epoch), advanced with elapsed like any path's.
        now: elapsed_ms,
        ..FailureContext::new("SAMPLE", "SAMPLE", r)
    };
    let d = backoff
        .kind
        .base_delay_ms(r, &ctx, scripts)
        .map_err(|e| e.to_string())?;
    let (lo, hi) = backoff.jitter_range_ms(d, ctx.last_delay);
    Ok(match backoff.kind.max() {
        Some(max) => (lo.min(ms(max)), hi.min(ms(max))),
        None => (lo, hi),
    })
}

/// The path of `policy` for a rule that decides only the attempts `attempt` allows (all of
/// them when it is empty): retry `r` is decided at attempt `r`, so only those retries appear,
/// and their totals count this rule's own delays.
pub(crate) fn policy_path(
    id: &str,
    at: Option<String>,
    policy: &RetryPolicy,
    label: &str,
    scripts: &ScriptEngine,
    attempt: &[Cmp<u64>],
) -> RetryPath {
    let backoff = &policy.backoff;
    let limit = policy.max_elapsed.map(ms);
    let mut notes = Vec::new();
    if matches!(backoff.kind, BackoffKind::Script(_)) {
        notes.push("delays come from the backoff script, evaluated on the sample context".into());
    }
    if !policy.respect_retry_after {
        notes.push("respect_retry_after is off: a failure's retry_after is ignored".into());
    }
    let mut rows = Vec::new();
    let (mut best, mut worst) = (0u64, 0u64);
    let (mut last_best, mut last_worst) = (0u64, 0u64);
    let mut worst_end: Option<EndCase> = None;
    let mut best_reason = "max_retries";
    let cap = policy.max_retries.min(MAX_ROWS);
    if policy.max_retries > MAX_ROWS {
        notes.push(format!("the table stops at {MAX_ROWS} retries"));
    }
    match first_decided_attempt(attempt, 1, u64::from(cap)) {
        None if policy.max_retries > 0 && !attempt.is_empty() => notes.push(format!(
            "no retry can happen: it decides only attempts {} but max_retries is {}, so every failure it decides is dead-lettered (max_retries)",
            describe_attempts(attempt),
            policy.max_retries
        )),
        Some(first) if first > 1 => notes.push(format!(
            "retries before {first} are decided by other rules or the defaults: its totals count only its own delays"
        )),
        _ => {}
    }
    for r in 1..=cap {
        if !decides_attempt(attempt, u64::from(r)) {
            continue;
        }
        let ranges = range_at(backoff, r, best, last_best, scripts).and_then(|(lo, _)| {
            range_at(backoff, r, worst, last_worst, scripts).map(|(_, hi)| (lo, hi))
        });
        let (lo, hi) = match ranges {
            Ok(range) => range,
            Err(e) => {
                notes.push(format!(
                    "the backoff script fails at retry {r} on the sample context ({e}): the rule would not decide, so the table stops"
                ));
                best_reason = "script_error";
                worst_end.get_or_insert(EndCase {
                    reason: "script_error",
                    retries: r - 1,
                });
                break;
            }
        };
        let fits = |total: u64, d: u64| limit.is_none_or(|l| total.saturating_add(d) <= l);
        if !fits(best, lo) {
            best_reason = "max_elapsed";
            break;
        }
        if worst_end.is_none() && !fits(worst, hi) {
            worst_end = Some(EndCase {
                reason: "max_elapsed",
                retries: r - 1,
            });
        }
        best = best.saturating_add(lo);
        last_best = lo;
        worst = worst.saturating_add(hi);
        last_worst = hi;
        // No retry starts after max_elapsed, so no path reaching this retry waited longer.
        let worst_total = limit.map_or(worst, |l| worst.min(l)).max(best);
        rows.push(RetryRow {
            retry: r,
            delay_min_ms: lo,
            delay_max_ms: hi,
            total_best_ms: best,
            total_worst_ms: worst_total,
            in_worst_case: worst_end.is_none(),
        });
    }
    let retries = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    RetryPath {
        rule: id.to_string(),
        at,
        give_up: false,
        backoff: Some(describe_backoff(backoff)),
        max_retries: Some(policy.max_retries),
        max_elapsed_ms: limit,
        end: PathEnd {
            dead_letter: label.to_string(),
            reason: best_reason,
            retries,
            worst_case: worst_end.unwrap_or(EndCase {
                reason: best_reason,
                retries,
            }),
        },
        retries: rows,
        notes,
        redrives: Vec::new(),
        total_worst_ms: None,
    }
}

/// `fixed 100ms`, `linear 2s +2s max 10s`, `exponential 1s ×2 max 1m, jitter full`, …
pub(crate) fn describe_backoff(backoff: &Backoff) -> String {
    let d = |v: &Duration| DurationDisplay(*v).to_string();
    let max = |m: &Option<Duration>| {
        m.as_ref()
            .map(|m| format!(" max {}", d(m)))
            .unwrap_or_default()
    };
    let mut s = match &backoff.kind {
        BackoffKind::Fixed(v) => format!("fixed {}", d(v)),
        BackoffKind::Linear { base, step, max: m } => {
            format!("linear {} +{}{}", d(base), d(step), max(m))
        }
        BackoffKind::Exponential {
            base,
            factor,
            max: m,
        } => {
            format!("exponential {} ×{factor}{}", d(base), max(m))
        }
        BackoffKind::Schedule(list) => {
            let l: Vec<String> = list.iter().map(d).collect();
            format!("schedule {}", l.join(", "))
        }
        BackoffKind::Script(e) => format!("script '{}'", e.source()),
    };
    let jitter = match backoff.jitter {
        Jitter::None => None,
        Jitter::Full => Some("full".to_string()),
        Jitter::Equal => Some("equal".to_string()),
        Jitter::Decorrelated => Some("decorrelated".to_string()),
        Jitter::Proportional(p) => Some(format!("{}%", p * 100.0)),
        Jitter::Additive(j) => Some(format!("+{}", d(&j))),
    };
    if let Some(j) = jitter {
        let _ = write!(s, ", jitter {j}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SourceFile, compile};

    fn table(yaml: &str) -> PathTable {
        retry_paths(&compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap())
    }

    fn rows(p: &RetryPath) -> Vec<(u64, u64, u64, u64)> {
        p.retries
            .iter()
            .map(|r| {
                (
                    r.delay_min_ms,
                    r.delay_max_ms,
                    r.total_best_ms,
                    r.total_worst_ms,
                )
            })
            .collect()
    }

    #[test]
    fn jitter_gives_ranges_and_max_clamps_them() {
        let t = table(
            "version: 1\nrules:\n  - id: e\n    retry:\n      max_retries: 4\n      backoff: { exponential: { base: 1s, max: 5s }, jitter: equal }\n",
        );
        assert_eq!(
            rows(&t.paths[0]),
            [
                (500, 1_000, 500, 1_000),
                (1_000, 2_000, 1_500, 3_000),
                (2_000, 4_000, 3_500, 7_000),
                (4_000, 5_000, 7_500, 12_000)
            ]
        );
    }

    #[test]
    fn decorrelated_jitter_follows_the_previous_delay_on_each_side() {
        let t = table(
            "version: 1\nrules:\n  - id: d\n    retry:\n      max_retries: 3\n      backoff: { exponential: { base: 100ms, max: 1s }, jitter: decorrelated }\n",
        );
        assert_eq!(
            rows(&t.paths[0]),
            [
                (100, 300, 100, 300),
                (100, 900, 200, 1_200),
                (100, 1_000, 300, 2_200)
            ]
        );
    }

    #[test]
    fn max_elapsed_ends_long_delays_sooner() {
        let t = table(
            "version: 1\nrules:\n  - id: m\n    retry:\n      max_retries: 5\n      max_elapsed: 5s\n      backoff: { fixed: 2s, jitter: \"50%\" }\n    dead_letter: L9\n",
        );
        let p = &t.paths[0];
        // short: 1s each → 5 retries fit in 5s; long: 3s each → only one.
        assert_eq!(p.retries.len(), 5);
        assert_eq!((p.end.reason, p.end.retries), ("max_retries", 5));
        assert_eq!(
            p.end.worst_case,
            EndCase {
                reason: "max_elapsed",
                retries: 1
            }
        );
        assert!(p.retries[0].in_worst_case && !p.retries[1].in_worst_case);
        assert_eq!(p.retries[4].total_worst_ms, 5_000);
        assert!(p.end_text().contains("when they are long"));
    }

    #[test]
    fn give_up_ends_at_once_and_csv_has_one_row_for_it() {
        let t = table(
            "version: 1\nrules:\n  - id: g\n    give_up: true\n    dead_letter: 'L3, poison'\n",
        );
        assert_eq!(t.paths[0].end_text(), "L3, poison at once (give_up)");
        let csv = t.to_csv();
        assert!(
            csv.contains("\ng,,,,,0,0,,\"L3, poison\",give_up,0,give_up,0\n"),
            "{csv}"
        );
        // The built-in defaults follow, one row per retry.
        assert_eq!(
            csv.lines().filter(|l| l.starts_with("defaults,")).count(),
            3
        );
    }

    #[test]
    fn guards_and_attempt_conditions_are_noted() {
        let t = table(
            "version: 1\nrules:\n  - id: late\n    match: { attempt: \">= 5\" }\n    if: 'signals.fail_rate > 0.5'\n    retry: { max_retries: 7, backoff: { schedule: [10s, 30s] } }\n",
        );
        let notes = t.paths[0].notes.join("\n");
        assert!(notes.contains("attempts >= 5"), "{notes}");
        assert!(notes.contains("is false on the sample context"), "{notes}");
    }

    #[test]
    fn only_the_retries_the_attempt_condition_allows_are_shown() {
        let t = table(
            "version: 1\nrules:\n  - id: late\n    match: { attempt: \">= 5\" }\n    retry: { backoff: { schedule: [10s, 30s, 1m, 2m, 5m] } }\n    dead_letter: L2\n",
        );
        let p = &t.paths[0];
        assert!(p.retries.is_empty(), "{:?}", p.retries);
        assert_eq!((p.end.reason, p.end.retries), ("max_retries", 0));
        let notes = p.notes.join("\n");
        assert!(
            notes.contains("no retry can happen: it decides only attempts >= 5 but max_retries is 3, so every failure it decides is dead-lettered (max_retries)"),
            "{notes}"
        );
        let t = table(
            "version: 1\nrules:\n  - id: late\n    match: { attempt: \">= 5\" }\n    retry: { max_retries: 7, backoff: { schedule: [10s, 30s, 1m, 2m, 5m] } }\n",
        );
        let p = &t.paths[0];
        let shown: Vec<(u32, u64, u64)> = p
            .retries
            .iter()
            .map(|r| (r.retry, r.delay_max_ms, r.total_worst_ms))
            .collect();
        assert_eq!(
            shown,
            [
                (5, 300_000, 300_000),
                (6, 300_000, 600_000),
                (7, 300_000, 900_000)
            ]
        );
        assert_eq!(p.end.retries, 3);
        assert!(
            p.notes
                .join("\n")
                .contains("retries before 5 are decided by other rules")
        );
    }
}
