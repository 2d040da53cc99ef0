//! Paths: one failure replayed attempt after attempt, deciding exactly as the engine does,
//! until it is dead-lettered.

use crate::context::FailureContext;
use crate::duration::DurationDisplay;
use crate::set::CompiledSet;
use crate::types::{Decision, GiveUpReason, Label, RuleRef};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::fmt;
use std::time::Duration;

/// The most attempts a simulated path makes before it is cut off as a runaway.
pub const MAX_PATH_ATTEMPTS: u32 = 10_000;

/// One decision of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The attempt that just failed.
    pub attempt: u32,
    /// Time since the first delivery began, when it failed.
    pub elapsed: Duration,
    /// The delay chosen before this attempt.
    pub last_delay: Duration,
    /// What the set decided.
    pub decision: Decision,
}

/// A failure replayed attempt after attempt until it is dead-lettered (or cut off after
/// [`MAX_PATH_ATTEMPTS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// The seed of the path's RNG.
    pub seed: u64,
    /// Time each attempt took before it failed.
    pub processing: Duration,
    /// The delay every failure asked for, if any.
    pub retry_after: Option<Duration>,
    /// Every decision, in order; all but the last are retries.
    pub steps: Vec<Step>,
}

/// How a path ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathEnd<'a> {
    /// The attempt whose failure was dead-lettered.
    pub attempt: u32,
    /// Where the message went.
    pub label: &'a Label,
    /// Why.
    pub reason: GiveUpReason,
    /// What decided.
    pub rule: &'a RuleRef,
}

impl Path {
    /// How many retries were scheduled.
    pub fn retries(&self) -> u32 {
        let n = self
            .steps
            .iter()
            .filter(|s| matches!(s.decision, Decision::Retry { .. }))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The retry delays, in order.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        self.steps.iter().filter_map(|s| match s.decision {
            Decision::Retry { delay, .. } => Some(delay),
            Decision::DeadLetter { .. } => None,
        })
    }

    /// The sum of the retry delays.
    pub fn total_delay(&self) -> Duration {
        self.delays().fold(Duration::ZERO, Duration::saturating_add)
    }

    /// The dead letter the path ended in, or `None` when it was cut off as a runaway.
    pub fn end(&self) -> Option<PathEnd<'_>> {
        match &self.steps.last()?.decision {
            Decision::DeadLetter {
                label,
                reason,
                rule,
            } => Some(PathEnd {
                attempt: self.steps.last()?.attempt,
                label,
                reason: *reason,
                rule,
            }),
            Decision::Retry { .. } => None,
        }
    }
}

/// The path as a table: attempt, elapsed, delay, decision, rule. Long paths show their head
/// and tail.
impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>7}  {:>10}  {:>10}  {:<30}  rule",
            "attempt", "elapsed", "delay", "decision"
        )?;
        let n = self.steps.len();
        for (i, step) in self.steps.iter().enumerate() {
            if n > 40 && (20..n - 10).contains(&i) {
                if i == 20 {
                    writeln!(f, "{:>7}  … {} more attempts …", "", n - 30)?;
                }
                continue;
            }
            let (delay, what) = match &step.decision {
                Decision::Retry { delay, .. } => {
                    (DurationDisplay(*delay).to_string(), "retry".to_string())
                }
                Decision::DeadLetter { label, reason, .. } => {
                    ("-".to_string(), format!("dead_letter {label} ({reason})"))
                }
            };
            writeln!(
                f,
                "{:>7}  {:>10}  {delay:>10}  {what:<30}  {}",
                step.attempt,
                DurationDisplay(step.elapsed).to_string(),
                step.decision.rule()
            )?;
        }
        Ok(())
    }
}

/// Replays the failure `ctx` attempt after attempt — `ctx.attempt`, then one more each time —
/// with `elapsed` and `now` advanced by each delay plus `processing` and `last_delay` set to
/// the previous delay, until the set decides a dead letter.
///
/// Decides exactly as [`PolicyHandle::decide`](crate::PolicyHandle::decide) does, with one
/// [`StdRng`] seeded by `seed` for the whole path: the same seed gives the same path. A path
/// that has not ended after [`MAX_PATH_ATTEMPTS`] is cut off ([`Path::end`] is `None`).
pub fn simulate_path(
    set: &CompiledSet,
    ctx: FailureContext<'_>,
    processing: Duration,
    seed: u64,
) -> Path {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ctx = ctx;
    let mut steps = Vec::new();
    loop {
        let decision = set.decide(&ctx, &mut rng).decision;
        let delay = match decision {
            Decision::Retry { delay, .. } => Some(delay),
            Decision::DeadLetter { .. } => None,
        };
        steps.push(Step {
            attempt: ctx.attempt,
            elapsed: ctx.elapsed,
            last_delay: ctx.last_delay,
            decision,
        });
        let Some(delay) = delay else { break };
        if steps.len() >= MAX_PATH_ATTEMPTS as usize || ctx.attempt == u32::MAX {
            break;
        }
        ctx.attempt += 1;
        let step = delay.saturating_add(processing);
        ctx.elapsed = ctx.elapsed.saturating_add(step);
        ctx.now = ctx
            .now
            .saturating_add(u64::try_from(step.as_millis()).unwrap_or(u64::MAX));
        ctx.last_delay = delay;
    }
    Path {
        seed,
        processing,
        retry_after: ctx.retry_after,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_path;
    use crate::{SourceFile, compile};

    fn set(yaml: &str) -> CompiledSet {
        compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap()
    }

    #[test]
    fn a_fixed_path_is_exact_and_ends_after_max_retries() {
        let s = set(
            "version: 1\nrules:\n  - id: p\n    match: { code: X }\n    retry: { max_retries: 3, backoff: { fixed: 100ms } }\n    dead_letter: L1\n",
        );
        let path = simulate_path(
            &s,
            FailureContext::new("", "X", 1),
            Duration::from_millis(20),
            7,
        );
        assert_eq!(path.retries(), 3);
        assert_eq!(path.total_delay(), Duration::from_millis(300));
        let elapsed: Vec<u64> = path
            .steps
            .iter()
            .map(|s| s.elapsed.as_millis() as u64)
            .collect();
        assert_eq!(elapsed, [0, 120, 240, 360]);
        let end = path.end().unwrap();
        assert_eq!(
            (end.label.as_str(), end.reason, end.attempt),
            ("L1", GiveUpReason::MaxRetries, 4)
        );
        check_path(&s, &path).unwrap();
    }

    #[test]
    fn the_same_seed_gives_the_same_path() {
        let s = set("version: 1\ndefaults:\n  retry: { max_retries: 6 }\n");
        let ctx = FailureContext::new("A", "B", 1);
        let a = simulate_path(&s, ctx, Duration::ZERO, 42);
        assert_eq!(a, simulate_path(&s, ctx, Duration::ZERO, 42));
        assert_eq!(a.retries(), 6);
    }

    #[test]
    fn a_path_advances_now_with_elapsed() {
        // Retried while it is before 00:00:01 (at +0); the clock moves 400ms per attempt.
        let s = set(
            "version: 1\nrules:\n  - id: early\n    if: 'now < 1_767_225_601_000'\n    retry: { max_retries: 9, backoff: { fixed: 300ms } }\n  - id: late\n    give_up: true\n",
        );
        let ctx = FailureContext {
            now: 1_767_225_600_000,
            ..FailureContext::new("A", "B", 1)
        };
        let path = simulate_path(&s, ctx, Duration::from_millis(100), 3);
        assert_eq!(path.retries(), 3, "{path}");
        assert_eq!(path.end().unwrap().rule.as_str(), "late");
    }

    #[test]
    fn a_runaway_path_is_cut_off() {
        let s = set(
            "version: 1\ndefaults:\n  retry: { max_retries: 4000000000, backoff: { fixed: 1ms } }\n",
        );
        let path = simulate_path(&s, FailureContext::new("A", "B", 1), Duration::ZERO, 1);
        assert!(path.end().is_none());
        assert_eq!(path.steps.len(), MAX_PATH_ATTEMPTS as usize);
        assert!(path.to_string().contains("… 9970 more attempts …"));
    }
}
