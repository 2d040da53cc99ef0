//! A `schedule` with entries no retry can reach: past `max_retries`, or before the first
//! attempt the rule's `attempt` condition lets it decide (retry r waits entry r, counted from
//! the first delivery). It usually means one of them was edited without the others.

use super::{LintCx, LintRule};
use crate::backoff::{BackoffKind, RetryPolicy};
use crate::diag::{Diagnostic, Pos};
use crate::duration::DurationDisplay;
use crate::paths::{decides_attempt, describe_attempts, first_decided_attempt};
use crate::pattern::Cmp;
use crate::rule::Outcome;
use std::sync::Arc;

pub(crate) struct UnusedSchedule;

impl LintRule for UnusedSchedule {
    fn check(&self, cx: &LintCx<'_>, out: &mut Vec<Diagnostic>) {
        let defaults = &cx.defaults.policy;
        for rule in cx.rules {
            let Outcome::Retry(policy) = &rule.outcome else {
                continue;
            };
            let attempt = &rule.conditions.attempt;
            // A rule without `retry:` shares the defaults' policy: reported once, there,
            // unless its attempt condition leaves more entries unused.
            if Arc::ptr_eq(policy, defaults) && attempt.is_empty() {
                continue;
            }
            if let Some(msg) = unused(policy, attempt) {
                let text = format!("rule '{}': {msg}", rule.id);
                out.push(Diagnostic::warning(&*rule.file, rule.pos, text));
            }
        }
        if let Some(msg) = unused(defaults, &[]) {
            let d = cx.defaults;
            let file = d.file.as_deref().unwrap_or("(built-in defaults)");
            out.push(Diagnostic::warning(
                file,
                d.pos.or(Some(Pos::new(1, 1))),
                format!("defaults: {msg}"),
            ));
        }
    }
}

/// Which schedule entries no retry of `policy` reaches, for a rule deciding `attempt`, and
/// what to say about them.
fn unused(policy: &RetryPolicy, attempt: &[Cmp<u64>]) -> Option<String> {
    let BackoffKind::Schedule(list) = &policy.backoff.kind else {
        return None;
    };
    let n = list.len();
    let max = u64::from(policy.max_retries);
    // Entry i (0-based) is waited by retry i + 1; the last one also by every retry past it.
    let used = |i: usize| {
        let r = i as u64 + 1;
        if i + 1 < n {
            r <= max && decides_attempt(attempt, r)
        } else {
            r <= max && first_decided_attempt(attempt, r, max).is_some()
        }
    };
    let extra: Vec<usize> = (0..n).filter(|&i| !used(i)).collect();
    if extra.is_empty() {
        return None;
    }
    let shown: Vec<String> = extra
        .iter()
        .map(|&i| DurationDisplay(list[i]).to_string())
        .collect();
    let k = extra.len();
    let which = if k == n {
        format!("all {k}")
    } else if extra[0] == n - k {
        format!("the last {k}")
    } else if extra[k - 1] == k - 1 {
        format!("the first {k}")
    } else {
        let at: Vec<String> = extra.iter().map(|i| (i + 1).to_string()).collect();
        format!("entries {}", at.join(", "))
    };
    if attempt.is_empty() {
        return Some(format!(
            "its schedule lists {n} delays but max_retries is {max}, so {which} ({}) can never be used; drop them or raise max_retries",
            shown.join(", ")
        ));
    }
    Some(format!(
        "its schedule lists {n} delays but it decides only attempts {} and max_retries is {max}, so {which} ({}) can never be used: retry r waits entry r, counting from the first delivery; drop them, raise max_retries, or change the attempt bound",
        describe_attempts(attempt),
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::warnings;

    #[test]
    fn extra_schedule_entries_are_reported_with_the_rule() {
        let w = warnings(
            "version: 1\nrules:\n  - id: s\n    retry: { max_retries: 2, backoff: { schedule: [1s, 5s, 10s, 30s] } }\n",
        );
        assert_eq!(
            w,
            [
                "a.yaml:3:5: warning: rule 's': its schedule lists 4 delays but max_retries is 2, so the last 2 (10s, 30s) can never be used; drop them or raise max_retries"
            ]
        );
    }

    #[test]
    fn entries_the_attempt_condition_skips_are_counted() {
        let w = warnings(
            "version: 1\nrules:\n  - id: late\n    match: { attempt: \">= 5\" }\n    retry: { backoff: { schedule: [10s, 30s, 1m, 2m, 5m] } }\n",
        );
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(
            w[1],
            "a.yaml:3:5: warning: rule 'late': its schedule lists 5 delays but it decides only attempts >= 5 and max_retries is 3, so all 5 (10s, 30s, 1m, 2m, 5m) can never be used: retry r waits entry r, counting from the first delivery; drop them, raise max_retries, or change the attempt bound"
        );
        let w = warnings(
            "version: 1\nrules:\n  - id: late\n    match: { attempt: \">= 5\" }\n    retry: { max_retries: 7, backoff: { schedule: [10s, 30s, 1m, 2m, 5m] } }\n",
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("so the first 4 (10s, 30s, 1m, 2m) can never be used"),
            "{w:?}"
        );
        let w = warnings(
            "version: 1\nrules:\n  - id: mid\n    match: { attempt: \"!= 2\" }\n    retry: { max_retries: 3, backoff: { schedule: [1s, 2s, 3s, 4s] } }\n",
        );
        assert!(
            w[0].contains("so entries 2, 4 (2s, 4s) can never be used"),
            "{w:?}"
        );
    }

    #[test]
    fn a_schedule_that_fits_is_fine() {
        assert!(warnings("version: 1\nrules:\n  - id: s\n    match: { attempt: \"<= 2\" }\n    retry: { max_retries: 5, backoff: { schedule: [1s, 5s] } }\n").is_empty());
        assert!(warnings("version: 1\nrules:\n  - id: s\n    retry: { max_retries: 5, backoff: { schedule: [1s, 5s] } }\n").is_empty());
        assert!(warnings("version: 1\nrules:\n  - id: s\n    retry: { max_retries: 2, backoff: { schedule: [1s, 5s] } }\n").is_empty());
    }
}
