//! Ready-made properties of a path, and what a set declares that they check against
//! ([`max_retries`], [`policy_of`], [`declared_label`], [`declared_cap`]). Each check returns
//! `Result<(), TestCaseError>`, so it composes with `?` inside `proptest!`.

use super::simulate::Path;
use crate::backoff::{BackoffKind, Jitter, RetryPolicy};
use crate::duration::DurationDisplay;
use crate::set::CompiledSet;
use crate::types::{Decision, Label, RuleRef};
use proptest::test_runner::TestCaseError;
use std::time::Duration;

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
/// [`check_retry_after_honoured`] and [`check_ends_in_declared_label`], on the path and on
/// each of its redriven replays ([`Path::redrives`]).
pub fn check_path(set: &CompiledSet, path: &Path) -> Result<(), TestCaseError> {
    for pass in path.passes() {
        check_terminates(set, pass)?;
        check_delays_within_cap(set, pass)?;
        check_retry_after_honoured(set, pass)?;
        check_ends_in_declared_label(set, pass)?;
    }
    Ok(())
}
