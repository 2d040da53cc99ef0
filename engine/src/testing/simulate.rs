//! Paths: one failure replayed attempt after attempt, deciding exactly as the engine does,
//! until it is dead-lettered; then, when its label redrives, replayed again as a first
//! delivery `after` the dead letter, up to the label's `max` times in the message's life.

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
    /// The replays of its dead letter, when its label redrives (`labels:` in
    /// `docs/spec/rules.md`), in order; each a path of its own from attempt 1, with no
    /// redrives of its own. Empty for a label that does not redrive, and for a replay.
    pub redrives: Vec<Redriven>,
}

/// One replay of a path's dead letter by its label's `redrive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redriven {
    /// Which replay this is (1 for the first) of how many the label allows.
    pub redrive: u32,
    /// The label's `max`.
    pub of: u32,
    /// The wait between the dead letter and the replay (the label's `after`).
    pub after: Duration,
    /// The replay: attempt 1 again, `elapsed` from 0, `now` moved on by `after`.
    pub path: Path,
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

    /// The pass and its replays, in order (the path itself first).
    pub fn passes(&self) -> impl Iterator<Item = &Path> + '_ {
        std::iter::once(self).chain(self.redrives.iter().map(|r| &r.path))
    }

    /// Where the message ends for good: the last replay's dead letter (the path's own
    /// without redrives), or `None` when a pass was cut off as a runaway.
    pub fn final_end(&self) -> Option<PathEnd<'_>> {
        self.passes().last()?.end()
    }

    /// The whole time from the first failure to the final dead letter, every delay and
    /// `after` wait counted (processing excluded, as in [`Path::total_delay`]).
    pub fn total_delay_with_redrives(&self) -> Duration {
        self.redrives.iter().fold(self.total_delay(), |t, r| {
            t.saturating_add(r.after)
                .saturating_add(r.path.total_delay())
        })
    }

    /// The dead letter this pass ended in (before any redrive), or `None` when it was cut
    /// off as a runaway.
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
        for r in &self.redrives {
            writeln!(
                f,
                "redrive {}/{} after {}:",
                r.redrive,
                r.of,
                DurationDisplay(r.after)
            )?;
            write!(f, "{}", r.path)?;
        }
        Ok(())
    }
}

/// Replays the failure `ctx` attempt after attempt — `ctx.attempt`, then one more each time —
/// with `elapsed` and `now` advanced by each delay plus `processing` and `last_delay` set to
/// the previous delay, until the set decides a dead letter. When that letter's label
/// redrives, the failure is replayed again `after` it as a first delivery (attempt 1,
/// `elapsed` 0, no last delay, `now` moved on), as the runtime's dead-letter keeper does, until
/// the message has been redriven the label's `max` times ([`Path::redrives`]).
///
/// Decides exactly as [`PolicyHandle::decide`](crate::PolicyHandle::decide) does, with one
/// [`StdRng`] seeded by `seed` for the whole path: the same seed gives the same path. A pass
/// that has not ended after [`MAX_PATH_ATTEMPTS`] is cut off ([`Path::end`] is `None`).
pub fn simulate_path(
    set: &CompiledSet,
    ctx: FailureContext<'_>,
    processing: Duration,
    seed: u64,
) -> Path {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut path, mut now) = one_pass(set, ctx, processing, seed, &mut rng);
    let mut done = 0u32;
    loop {
        let last = path.passes().last().and_then(Path::end);
        let Some(redrive) = last
            .and_then(|end| set.labels().get(end.label.as_str()))
            .and_then(|policy| policy.redrive)
        else {
            break;
        };
        if done >= redrive.max {
            break;
        }
        done += 1;
        now = now.saturating_add(u64::try_from(redrive.after.as_millis()).unwrap_or(u64::MAX));
        let again = FailureContext {
            attempt: 1,
            elapsed: Duration::ZERO,
            last_delay: Duration::ZERO,
            now,
            ..ctx
        };
        let (replay, end_now) = one_pass(set, again, processing, seed, &mut rng);
        now = end_now;
        path.redrives.push(Redriven {
            redrive: done,
            of: redrive.max,
            after: redrive.after,
            path: replay,
        });
    }
    path
}

/// One pass from `ctx` to its dead letter; with `now` when it ended.
fn one_pass(
    set: &CompiledSet,
    mut ctx: FailureContext<'_>,
    processing: Duration,
    seed: u64,
    rng: &mut StdRng,
) -> (Path, u64) {
    let mut steps = Vec::new();
    loop {
        let decision = set.decide(&ctx, rng).decision;
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
    let path = Path {
        seed,
        processing,
        retry_after: ctx.retry_after,
        steps,
        redrives: Vec::new(),
    };
    (path, ctx.now)
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

    fn labels_fixture() -> CompiledSet {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/labels");
        crate::load_dir(&dir).unwrap().unwrap()
    }

    #[test]
    fn a_path_follows_its_labels_redrives_from_attempt_one_with_now_moved_on() {
        let s = labels_fixture();
        let ctx = FailureContext {
            now: 1_767_225_600_000,
            ..FailureContext::new("PAYMENT", "PAY_PROCESSING", 1)
        };
        let path = simulate_path(&s, ctx, Duration::from_millis(20), 5);
        // The pass itself: 3 retries of 100ms, then L1, which redrives 3 times after 10m.
        assert_eq!(path.retries(), 3);
        assert_eq!(path.end().unwrap().label.as_str(), "L1");
        let legs: Vec<(u32, u32, Duration, u32, u32)> = path
            .redrives
            .iter()
            .map(|r| {
                let first = r.path.steps[0].attempt;
                (r.redrive, r.of, r.after, first, r.path.retries())
            })
            .collect();
        let ten_minutes = Duration::from_secs(600);
        assert_eq!(
            legs,
            [
                (1, 3, ten_minutes, 1, 3),
                (2, 3, ten_minutes, 1, 3),
                (3, 3, ten_minutes, 1, 3)
            ]
        );
        assert!(path.redrives.iter().all(|r| r.path.redrives.is_empty()));
        assert_eq!(path.final_end().unwrap().label.as_str(), "L1");
        assert_eq!(
            path.total_delay_with_redrives(),
            Duration::from_millis(4 * 300) + 3 * ten_minutes
        );
        // Each replay starts with elapsed 0 and no last delay, and its clock has moved on by
        // the pass before it (3 × (100ms + 20ms) + the last attempt's 0) plus `after`.
        let second = &path.redrives[0].path.steps[0];
        assert_eq!(
            (second.elapsed, second.last_delay),
            (Duration::ZERO, Duration::ZERO)
        );
        let table = path.to_string();
        assert!(table.contains("redrive 1/3 after 10m:"), "{table}");
        assert!(table.contains("redrive 3/3 after 10m:"), "{table}");
        check_path(&s, &path).unwrap();
    }

    #[test]
    fn a_replay_sees_the_time_the_redrive_waited() {
        // Retried while before 00:05 (at +0); L1 redrives after 10m, so the replay is
        // decided past it and gives up at once.
        let s = set(
            "version: 1\nlabels:\n  L1: { redrive: { after: 10m, max: 2 } }\n  L3: {}\nrules:\n  - id: early\n    if: 'now < 1_767_225_900_000'\n    retry: { max_retries: 2, backoff: { fixed: 1s } }\n    dead_letter: L1\n  - id: late\n    give_up: true\n    dead_letter: L3\n",
        );
        let ctx = FailureContext {
            now: 1_767_225_600_000,
            ..FailureContext::new("A", "B", 1)
        };
        let path = simulate_path(&s, ctx, Duration::ZERO, 3);
        assert_eq!(path.retries(), 2);
        assert_eq!(path.redrives.len(), 1, "{path}");
        let replay = &path.redrives[0].path;
        assert_eq!(replay.end().unwrap().rule.as_str(), "late");
        assert_eq!(path.final_end().unwrap().label.as_str(), "L3");
    }

    #[test]
    fn a_label_without_redrive_ends_the_path() {
        let s = labels_fixture();
        let path = simulate_path(
            &s,
            FailureContext::new("", "DB_LOCK_WAIT", 1),
            Duration::ZERO,
            9,
        );
        assert_eq!(path.end().unwrap().label.as_str(), "L2");
        assert!(path.redrives.is_empty());
        assert_eq!(path.total_delay_with_redrives(), path.total_delay());
    }
}
