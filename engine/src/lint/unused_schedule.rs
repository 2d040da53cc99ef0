//! A `schedule` longer than `max_retries`: its extra entries can never be used, which usually
//! means one of the two was edited without the other.

use super::{LintCx, LintRule};
use crate::backoff::{BackoffKind, RetryPolicy};
use crate::diag::{Diagnostic, Pos};
use crate::duration::DurationDisplay;
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
            // A rule without `retry:` shares the defaults' policy: reported once, there.
            if Arc::ptr_eq(policy, defaults) {
                continue;
            }
            if let Some(msg) = unused(policy) {
                let text = format!("rule '{}': {msg}", rule.id);
                out.push(Diagnostic::warning(&*rule.file, rule.pos, text));
            }
        }
        if let Some(msg) = unused(defaults) {
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

fn unused(policy: &RetryPolicy) -> Option<String> {
    let BackoffKind::Schedule(list) = &policy.backoff.kind else {
        return None;
    };
    let used = usize::try_from(policy.max_retries).unwrap_or(usize::MAX);
    let extra = list.get(used..).filter(|e| !e.is_empty())?;
    let shown: Vec<String> = extra
        .iter()
        .map(|d| DurationDisplay(*d).to_string())
        .collect();
    Some(format!(
        "its schedule lists {} delays but max_retries is {}, so the last {} ({}) can never be used; drop them or raise max_retries",
        list.len(),
        policy.max_retries,
        extra.len(),
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use crate::{SourceFile, compile};

    fn warnings(yaml: &str) -> Vec<String> {
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
        set.warnings().iter().map(ToString::to_string).collect()
    }

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
    fn a_schedule_that_fits_is_fine() {
        assert!(warnings("version: 1\nrules:\n  - id: s\n    retry: { max_retries: 5, backoff: { schedule: [1s, 5s] } }\n").is_empty());
        assert!(warnings("version: 1\nrules:\n  - id: s\n    retry: { max_retries: 2, backoff: { schedule: [1s, 5s] } }\n").is_empty());
    }
}
