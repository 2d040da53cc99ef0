//! A rule whose `attempt` condition lets it decide only attempts past its `max_retries`: it
//! matches, but every failure it decides is dead-lettered at once (reason `max_retries`),
//! which is rarely what its `retry:` meant. Retry `r` is decided at attempt `r`, counted
//! from the first delivery, not from the rule's first decision.

use super::{LintCx, LintRule};
use crate::diag::Diagnostic;
use crate::paths::{describe_attempts, first_decided_attempt};
use crate::rule::Outcome;

pub(crate) struct ImpossibleRetry;

impl LintRule for ImpossibleRetry {
    fn check(&self, cx: &LintCx<'_>, out: &mut Vec<Diagnostic>) {
        for rule in cx.rules {
            let Outcome::Retry(policy) = &rule.outcome else {
                continue;
            };
            let attempt = &rule.conditions.attempt;
            let max = u64::from(policy.max_retries);
            // `max_retries: 0` says "never retry" on purpose.
            if attempt.is_empty() || max == 0 || first_decided_attempt(attempt, 1, max).is_some() {
                continue;
            }
            // A rule no attempt satisfies never matches at all: a different problem.
            let Some(first) = first_decided_attempt(attempt, max + 1, u64::MAX) else {
                continue;
            };
            let from = if policy.max_retries == cx.defaults.policy.max_retries {
                " (as in the defaults)"
            } else {
                ""
            };
            out.push(Diagnostic::warning(
                &*rule.file,
                rule.pos,
                format!(
                    "rule '{}' can never retry: it decides only attempts {}, but max_retries is {max}{from}, so every failure it decides is dead-lettered to {} (reason max_retries); raise max_retries to at least {first}, or lower the attempt bound so that it allows attempt {max} or less",
                    rule.id,
                    describe_attempts(attempt),
                    rule.dead_letter,
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::warnings;

    #[test]
    fn an_attempt_bound_past_max_retries_is_reported_with_the_rule() {
        let w = warnings(
            "version: 1\nrules:\n  - id: late\n    match: { code: NET_TIMEOUT, attempt: \">= 5\" }\n    retry: { backoff: { fixed: 1s } }\n    dead_letter: L2\n",
        );
        assert_eq!(
            w,
            [
                "a.yaml:3:5: warning: rule 'late' can never retry: it decides only attempts >= 5, but max_retries is 3 (as in the defaults), so every failure it decides is dead-lettered to L2 (reason max_retries); raise max_retries to at least 5, or lower the attempt bound so that it allows attempt 3 or less"
            ]
        );
    }

    #[test]
    fn a_rule_without_retry_inherits_the_limit_too() {
        let w = warnings(
            "version: 1\ndefaults: { retry: { max_retries: 2 } }\nrules:\n  - id: late\n    match: { attempt: [\"> 1\", \"!= 2\"] }\n",
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("attempts > 1 and != 2, but max_retries is 2")
                && w[0].contains("at least 3"),
            "{w:?}"
        );
    }

    #[test]
    fn a_reachable_retry_or_no_retry_on_purpose_keeps_it_quiet() {
        for rule in [
            "match: { attempt: \">= 3\" }\n    retry: { max_retries: 3 }",
            "match: { attempt: \"!= 1\" }\n    retry: { max_retries: 2 }",
            "match: { attempt: \">= 5\" }\n    retry: { max_retries: 0 }",
            "match: { attempt: \">= 5\" }\n    give_up: true",
            "retry: { max_retries: 3 }",
        ] {
            let yaml = format!("version: 1\nrules:\n  - id: r\n    {rule}\n");
            assert!(warnings(&yaml).is_empty(), "{rule}: {:?}", warnings(&yaml));
        }
    }
}
