//! Property-testing support for retry paths (feature `testing`): proptest strategies for
//! failures drawn from a loaded set, [`simulate_path`], and ready-made property checks.
//!
//! A path replays one failure attempt after attempt, deciding exactly as the engine does (the
//! same decision loop, with a seeded RNG), until the decision is a dead letter. The checks
//! return `Result<(), TestCaseError>`, so they compose with `?` inside `proptest!` or a
//! [`TestRunner`](proptest::test_runner::TestRunner):
//!
//! ```
//! use proptest::prelude::*;
//! use proptest::test_runner::TestRunner;
//! use rebound_engine::testing::{check_path, failures, simulate_path};
//! use rebound_engine::{SourceFile, compile};
//! use std::time::Duration;
//!
//! let yaml = "version: 1
//! rules:
//!   - id: db-lock
//!     match: { code: \"DB_LOCK*\" }
//!     retry:
//!       max_retries: 5
//!       max_elapsed: 2m
//!       backoff: { exponential: { base: 1s, max: 30s }, jitter: equal }
//!     dead_letter: L2
//! ";
//! let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
//! let mut runner = TestRunner::default();
//! runner
//!     .run(&(failures(&set), any::<u64>()), |(failure, seed)| {
//!         let path = simulate_path(&set, failure.context(), Duration::from_millis(20), seed);
//!         // terminates within max_retries + 1 attempts, delays within the declared cap,
//!         // retry_after honoured, and it ends in the deciding rule's declared label.
//!         check_path(&set, &path)?;
//!         Ok(())
//!     })
//!     .unwrap();
//! ```

use crate::backoff::{BackoffKind, Jitter, RetryPolicy};
use crate::context::{Attrs, FailureContext, Signals};
use crate::duration::DurationDisplay;
use crate::pattern::{NameMatcher, NamePattern};
use crate::set::CompiledSet;
use crate::types::{Decision, GiveUpReason, Label, RuleRef};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::{BTreeMap, BTreeSet};
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
/// with `elapsed` advanced by each delay plus `processing` and `last_delay` set to the
/// previous delay, until the set decides a dead letter.
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
        ctx.elapsed = ctx.elapsed.saturating_add(delay).saturating_add(processing);
        ctx.last_delay = delay;
    }
    Path {
        seed,
        processing,
        retry_after: ctx.retry_after,
        steps,
    }
}

/// A failure that owns its names and maps (the engine's [`OwnedFailure`](crate::OwnedFailure)).
pub use crate::context::OwnedFailure as Failure;

/// The names a set talks about: what its conditions and expressions mention.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    /// Business types in `match.biz` (a glob contributes names it matches).
    pub biz: Vec<String>,
    /// Error codes in `match.code` (likewise).
    pub codes: Vec<String>,
    /// Attribute names in `match.attrs`, each with the values its conditions mention.
    pub attrs: BTreeMap<String, Vec<String>>,
    /// Signal names that guards and delay scripts read (`signals.NAME`).
    pub signals: Vec<String>,
}

/// The vocabulary of `set`.
pub fn vocabulary(set: &CompiledSet) -> Vocabulary {
    let mut biz = BTreeSet::new();
    let mut codes = BTreeSet::new();
    let mut attrs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut signals = BTreeSet::new();
    for rule in &set.rules {
        let c = &rule.conditions;
        if let Some(m) = &c.biz {
            biz.extend(names_matching(m));
        }
        if let Some(m) = &c.code {
            codes.extend(names_matching(m));
        }
        for (name, m) in &c.attrs {
            attrs
                .entry(name.clone())
                .or_default()
                .extend(names_matching(m));
        }
        if let Some(guard) = &rule.guard {
            signals.extend(signal_names(guard.source()));
        }
        if let Some(p) = rule.policy()
            && let BackoffKind::Script(e) = &p.backoff.kind
        {
            signals.extend(signal_names(e.source()));
        }
    }
    Vocabulary {
        biz: biz.into_iter().collect(),
        codes: codes.into_iter().collect(),
        attrs: attrs
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect(),
        signals: signals.into_iter().collect(),
    }
}

/// Names a matcher matches: each exact name, and for a glob its shortest and a longer match.
fn names_matching(m: &NameMatcher) -> Vec<String> {
    let mut out = Vec::new();
    for p in m.patterns() {
        match p {
            NamePattern::Exact(name) => out.push(name.to_string()),
            NamePattern::Glob(g) if g.is_catch_all() => {}
            NamePattern::Glob(_) => {
                let source = p.to_string();
                out.push(source.replace('*', ""));
                out.push(source.replace('*', "_X"));
            }
        }
    }
    out
}

/// `NAME` for each `signals.NAME` or `signals["NAME"]` in a rhai expression.
fn signal_names(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("signals") {
        rest = &rest[at + "signals".len()..];
        let name: String = if let Some(r) = rest.strip_prefix('.') {
            r.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        } else if let Some(r) = rest.strip_prefix("[\"") {
            r.chars().take_while(|c| *c != '"').collect()
        } else {
            continue;
        };
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// A name from `known`, or now and then one the set has never heard of.
fn name_strategy(known: Vec<String>) -> BoxedStrategy<String> {
    let unknown = "UNKNOWN_[A-Z]{1,8}".boxed();
    if known.is_empty() {
        return prop_oneof![Just(String::new()), unknown].boxed();
    }
    prop_oneof![4 => prop::sample::select(known), 1 => unknown].boxed()
}

fn attrs_strategy(vocab: &Vocabulary) -> BoxedStrategy<Attrs> {
    let entries: Vec<BoxedStrategy<Option<(String, String)>>> = vocab
        .attrs
        .iter()
        .map(|(name, values)| {
            let name = name.clone();
            prop::option::of(name_strategy(values.clone()))
                .prop_map(move |v| v.map(|v| (name.clone(), v)))
                .boxed()
        })
        .collect();
    entries
        .prop_map(|list| list.into_iter().flatten().collect())
        .boxed()
}

fn signals_strategy(vocab: &Vocabulary) -> BoxedStrategy<Signals> {
    let entries: Vec<BoxedStrategy<Option<(String, f64)>>> = vocab
        .signals
        .iter()
        .map(|name| {
            let name = name.clone();
            prop::option::of(prop_oneof![3 => 0.0..=1.0f64, 1 => 0.0..10_000.0f64])
                .prop_map(move |v| v.map(|v| (name.clone(), v)))
                .boxed()
        })
        .collect();
    entries
        .prop_map(|list| list.into_iter().flatten().collect())
        .boxed()
}

fn millis(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_millis)
}

/// First failures (attempt 1, nothing elapsed) drawn from `set`: its biz types, codes,
/// attribute values and signals, plus unknown names; sometimes with a `retry_after`.
/// The start of a path.
pub fn failures(set: &CompiledSet) -> BoxedStrategy<Failure> {
    let vocab = vocabulary(set);
    (
        name_strategy(vocab.biz.clone()),
        name_strategy(vocab.codes.clone()),
        prop::option::weighted(0.2, millis(0..=120_000)),
        attrs_strategy(&vocab),
        signals_strategy(&vocab),
    )
        .prop_map(|(biz, code, retry_after, attrs, signals)| Failure {
            biz,
            code,
            attempt: 1,
            elapsed: Duration::ZERO,
            retry_after,
            last_delay: Duration::ZERO,
            attrs,
            signals,
        })
        .boxed()
}

/// Failures at any point of a path drawn from `set`: like [`failures`], with an attempt up to
/// two past the set's largest `max_retries`, up to a day elapsed and a previous delay.
pub fn failure_contexts(set: &CompiledSet) -> BoxedStrategy<Failure> {
    let top = max_retries(set).saturating_add(2).min(MAX_PATH_ATTEMPTS);
    (
        failures(set),
        1..=top,
        millis(0..=86_400_000),
        millis(0..=600_000),
    )
        .prop_map(|(f, attempt, elapsed, last_delay)| Failure {
            attempt,
            elapsed,
            last_delay,
            ..f
        })
        .boxed()
}

/// The largest `max_retries` of any rule or of the defaults.
pub fn max_retries(set: &CompiledSet) -> u32 {
    set.rules()
        .filter_map(|r| r.policy())
        .map(|p| p.max_retries)
        .chain([set.defaults().policy.max_retries])
        .max()
        .unwrap_or(0)
}

/// The policy that made a decision: the rule's (`None` for a `give_up` rule) or the defaults'.
pub fn policy_of<'s>(set: &'s CompiledSet, rule: &RuleRef) -> Option<&'s RetryPolicy> {
    match rule {
        RuleRef::Defaults => Some(&set.defaults().policy),
        RuleRef::Rule(id) => set.rule(*id).and_then(|r| r.policy()),
    }
}

/// The dead-letter label a rule (or the defaults) declares.
pub fn declared_label<'s>(set: &'s CompiledSet, rule: &RuleRef) -> Option<&'s Label> {
    match rule {
        RuleRef::Defaults => Some(&set.defaults().dead_letter),
        RuleRef::Rule(id) => set
            .rules
            .iter()
            .find(|r| &r.id == id)
            .map(|r| &r.dead_letter),
    }
}

/// The longest delay a policy can choose before `retry_after`: its backoff's `max`, or for
/// a `fixed` or `schedule` backoff the longest entry after jitter. `None` when nothing caps
/// it (a linear, exponential or script backoff without `max`, or decorrelated jitter).
pub fn declared_cap(policy: &RetryPolicy) -> Option<Duration> {
    let backoff = &policy.backoff;
    if let Some(max) = backoff.kind.max() {
        return Some(max);
    }
    let longest = match &backoff.kind {
        BackoffKind::Fixed(d) => *d,
        BackoffKind::Schedule(list) => list.iter().copied().max().unwrap_or_default(),
        _ => return None,
    };
    if backoff.jitter == Jitter::Decorrelated {
        return None;
    }
    let ms = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX);
    Some(Duration::from_millis(
        backoff.jitter_range_ms(ms, Duration::ZERO).1,
    ))
}

fn fail(path: &Path, what: String) -> TestCaseError {
    TestCaseError::fail(format!("{what} (seed {})\n{path}", path.seed))
}

/// The path ends in a dead letter within `max_retries + 1` attempts (the set's largest
/// `max_retries`), and no rule retried an attempt past its own `max_retries`.
pub fn check_terminates(set: &CompiledSet, path: &Path) -> Result<(), TestCaseError> {
    if path.end().is_none() {
        return Err(fail(
            path,
            format!(
                "the path did not end: no dead letter after {} attempts",
                path.steps.len()
            ),
        ));
    }
    let limit = u64::from(max_retries(set)) + 1;
    if path.steps.len() as u64 > limit {
        return Err(fail(
            path,
            format!(
                "the path took {} attempts, more than max_retries + 1 = {limit}",
                path.steps.len()
            ),
        ));
    }
    for step in &path.steps {
        if let Decision::Retry { rule, .. } = &step.decision
            && let Some(p) = policy_of(set, rule)
            && step.attempt > p.max_retries
        {
            return Err(fail(
                path,
                format!(
                    "rule {rule} retried attempt {} although its max_retries is {}",
                    step.attempt, p.max_retries
                ),
            ));
        }
    }
    Ok(())
}

/// Every delay is non-negative and within the deciding policy's declared cap
/// ([`declared_cap`]), or equal to the `retry_after` it honoured.
pub fn check_delays_within_cap(set: &CompiledSet, path: &Path) -> Result<(), TestCaseError> {
    for step in &path.steps {
        let Decision::Retry { delay, rule } = &step.decision else {
            continue;
        };
        // `Duration` cannot be negative; the check is in the type.
        let Some(policy) = policy_of(set, rule) else {
            continue;
        };
        let Some(cap) = declared_cap(policy) else {
            continue;
        };
        let honoured = path.retry_after.filter(|_| policy.respect_retry_after);
        let allowed = honoured.map_or(cap, |r| cap.max(r));
        if *delay > allowed {
            return Err(fail(
                path,
                format!(
                    "attempt {}: delay {} exceeds the cap {} of rule {rule}",
                    step.attempt,
                    DurationDisplay(*delay),
                    DurationDisplay(allowed)
                ),
            ));
        }
    }
    Ok(())
}

/// Every retry decided by a policy with `respect_retry_after` waits at least the path's
/// `retry_after`.
pub fn check_retry_after_honoured(set: &CompiledSet, path: &Path) -> Result<(), TestCaseError> {
    let Some(asked) = path.retry_after else {
        return Ok(());
    };
    for step in &path.steps {
        if let Decision::Retry { delay, rule } = &step.decision
            && policy_of(set, rule).is_some_and(|p| p.respect_retry_after)
            && *delay < asked
        {
            return Err(fail(
                path,
                format!(
                    "attempt {}: rule {rule} waited {} although the failure asked for {}",
                    step.attempt,
                    DurationDisplay(*delay),
                    DurationDisplay(asked)
                ),
            ));
        }
    }
    Ok(())
}

/// The path ends in `label`.
pub fn check_ends_in(path: &Path, label: &str) -> Result<(), TestCaseError> {
    match path.end() {
        Some(end) if end.label.as_str() == label => Ok(()),
        Some(end) => Err(fail(
            path,
            format!("the path ends in {}, not in {label}", end.label),
        )),
        None => Err(fail(path, format!("the path never ends (wanted {label})"))),
    }
}

/// The path ends in the label its final rule declares (its `dead_letter`, or the default).
pub fn check_ends_in_declared_label(set: &CompiledSet, path: &Path) -> Result<(), TestCaseError> {
    let Some(end) = path.end() else {
        return Err(fail(path, "the path never ends".to_string()));
    };
    match declared_label(set, end.rule) {
        Some(label) => check_ends_in(path, label.as_str()),
        None => Err(fail(
            path,
            format!("the final rule {} is not in the set", end.rule),
        )),
    }
}

/// All the ready-made properties: [`check_terminates`], [`check_delays_within_cap`],
/// [`check_retry_after_honoured`] and [`check_ends_in_declared_label`].
pub fn check_path(set: &CompiledSet, path: &Path) -> Result<(), TestCaseError> {
    check_terminates(set, path)?;
    check_delays_within_cap(set, path)?;
    check_retry_after_honoured(set, path)?;
    check_ends_in_declared_label(set, path)
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn a_runaway_path_is_cut_off() {
        let s = set(
            "version: 1\ndefaults:\n  retry: { max_retries: 4000000000, backoff: { fixed: 1ms } }\n",
        );
        let path = simulate_path(&s, FailureContext::new("A", "B", 1), Duration::ZERO, 1);
        assert!(path.end().is_none());
        assert_eq!(path.steps.len(), MAX_PATH_ATTEMPTS as usize);
        assert!(path.to_string().contains("… 9970 more attempts …"));
    }

    #[test]
    fn vocabulary_collects_names_globs_attrs_and_signals() {
        let s = set(
            "version: 1\nrules:\n  - id: a\n    match: { biz: PAY, code: \"DB_*\", attrs: { tier: [gold, silver] } }\n    if: 'signals.fail_rate > 0.5 || signals[\"depth\"] > 3.0'\n",
        );
        let v = vocabulary(&s);
        assert_eq!(v.biz, ["PAY"]);
        assert_eq!(v.codes, ["DB_", "DB__X"]);
        assert_eq!(v.attrs["tier"], ["gold", "silver"]);
        assert_eq!(v.signals, ["depth", "fail_rate"]);
    }
}
