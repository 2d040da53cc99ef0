//! Which rules, and which of their outcomes, a suite exercised (`rebound test --coverage`),
//! in the spirit of `opa test --coverage`: every decision made while the tests ran, under
//! every seed, counts; per rule, the outcomes it can reach that no test reached are listed.

use crate::backoff::RetryPolicy;
use crate::rule::CompiledRule;
use crate::set::CompiledSet;
use crate::types::{Decision, GiveUpReason, RuleRef};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;

/// What a decision came to, as coverage counts it: a retry, or a dead letter for a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Retried.
    Retry,
    /// Dead-lettered because the rule says `give_up: true`.
    GiveUp,
    /// Dead-lettered past `max_retries`.
    MaxRetries,
    /// Dead-lettered because the retry would start after `max_elapsed`.
    MaxElapsed,
}

impl Outcome {
    /// `retry`, `give_up`, `max_retries` or `max_elapsed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Retry => "retry",
            Outcome::GiveUp => "give_up",
            Outcome::MaxRetries => "max_retries",
            Outcome::MaxElapsed => "max_elapsed",
        }
    }

    /// The outcome of a decision; `None` for the runtime's own reasons, which `decide` never
    /// gives.
    pub(crate) fn of(decision: &Decision) -> Option<Outcome> {
        match decision {
            Decision::Retry { .. } => Some(Outcome::Retry),
            Decision::DeadLetter { reason, .. } => match reason {
                GiveUpReason::GiveUp => Some(Outcome::GiveUp),
                GiveUpReason::MaxRetries => Some(Outcome::MaxRetries),
                GiveUpReason::MaxElapsed => Some(Outcome::MaxElapsed),
                GiveUpReason::PolicyError
                | GiveUpReason::CrashLoop
                | GiveUpReason::Killed
                | GiveUpReason::Budget
                | GiveUpReason::Refused => None,
            },
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The (deciding rule, outcome) pairs seen while running tests.
pub(crate) type Seen = HashSet<(RuleRef, Outcome)>;

/// Records every decision of `steps` into `seen`.
pub(crate) fn record<'d>(seen: &mut Seen, decisions: impl IntoIterator<Item = &'d Decision>) {
    for d in decisions {
        if let Some(outcome) = Outcome::of(d) {
            seen.insert((d.rule().clone(), outcome));
        }
    }
}

/// What the tests exercised, per rule and for the defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coverage {
    /// Every rule in first-match order, then `defaults`.
    pub rules: Vec<RuleCoverage>,
    /// Reachable outcomes that some test exercised, over all rules.
    pub covered: usize,
    /// Reachable outcomes, over all rules.
    pub total: usize,
    /// `covered / total` in percent (100 when nothing is reachable).
    pub percent: f64,
}

/// What the tests exercised of one rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleCoverage {
    /// The rule's id, or `defaults`.
    pub rule: String,
    /// Where it is written, as `FILE:LINE:COL` (for the defaults, where `defaults:` is, if
    /// a file gives them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Outcomes some test's decisions came to.
    pub seen: Vec<Outcome>,
    /// Outcomes the rule can reach that no test's decision came to.
    pub not_seen: Vec<Outcome>,
    /// Why the rule can never decide, when it cannot (then it counts for nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The outcomes a policy can reach: a retry when it allows one, `max_retries` always (the
/// attempt keeps growing), `max_elapsed` when it sets one.
fn reachable(policy: Option<&RetryPolicy>) -> Vec<Outcome> {
    match policy {
        None => vec![Outcome::GiveUp],
        Some(p) => {
            let mut out = Vec::new();
            if p.max_retries >= 1 {
                out.push(Outcome::Retry);
            }
            out.push(Outcome::MaxRetries);
            if p.max_elapsed.is_some() {
                out.push(Outcome::MaxElapsed);
            }
            out
        }
    }
}

/// A rule that decides every failure: no condition, no guard, and no delay script that could
/// fail and pass the decision on.
fn decides_everything(rule: &CompiledRule) -> bool {
    let c = &rule.conditions;
    let names =
        |m: &Option<crate::pattern::NameMatcher>| m.as_ref().is_none_or(|m| m.is_catch_all());
    let script = rule
        .policy()
        .is_some_and(|p| matches!(p.backoff.kind, crate::backoff::BackoffKind::Script(_)));
    names(&c.biz)
        && names(&c.code)
        && c.attempt.is_empty()
        && c.elapsed.is_empty()
        && c.attrs.is_empty()
        && rule.guard.is_none()
        && !script
}

fn entry(
    rule: String,
    at: Option<String>,
    reach: Vec<Outcome>,
    seen: &Seen,
    by: &RuleRef,
) -> RuleCoverage {
    let mut hit: Vec<Outcome> = seen
        .iter()
        .filter(|(r, _)| r == by)
        .map(|(_, o)| *o)
        .collect();
    hit.sort();
    let not_seen = reach.into_iter().filter(|o| !hit.contains(o)).collect();
    RuleCoverage {
        rule,
        at,
        seen: hit,
        not_seen,
        note: None,
    }
}

/// The coverage of `set` by the decisions in `seen`.
pub(crate) fn coverage(set: &CompiledSet, seen: &Seen) -> Coverage {
    let mut rules: Vec<RuleCoverage> = set
        .rules
        .iter()
        .map(|r| {
            entry(
                r.id.to_string(),
                Some(r.at()),
                reachable(r.policy()),
                seen,
                &RuleRef::Rule(r.id),
            )
        })
        .collect();
    let d = &set.defaults;
    let at = d.file.as_ref().map(|f| match d.pos {
        Some(p) => format!("{f}:{p}"),
        None => f.to_string(),
    });
    let mut defaults = entry(
        "defaults".into(),
        at,
        reachable(Some(&d.policy)),
        seen,
        &RuleRef::Defaults,
    );
    if let Some(all) = set.rules.iter().find(|r| decides_everything(r))
        && defaults.seen.is_empty()
    {
        defaults.not_seen.clear();
        defaults.note = Some(format!(
            "never decides: rule '{}' ({}) matches every failure",
            all.id,
            all.at()
        ));
    }
    rules.push(defaults);
    let covered = rules.iter().map(|r| r.seen.len()).sum::<usize>();
    let total = covered + rules.iter().map(|r| r.not_seen.len()).sum::<usize>();
    let percent = if total == 0 {
        100.0
    } else {
        (covered as f64 * 1000.0 / total as f64).round() / 10.0
    };
    Coverage {
        rules,
        covered,
        total,
        percent,
    }
}

/// Per rule: the outcomes seen, then the ones never exercised; then the total.
impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "coverage: {}/{} outcomes ({}%)",
            self.covered, self.total, self.percent
        )?;
        let width = self.rules.iter().map(|r| r.rule.len()).max().unwrap_or(0);
        let list = |v: &[Outcome]| v.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(", ");
        for r in &self.rules {
            let at =
                r.at.as_deref()
                    .map(|a| format!("  ({a})"))
                    .unwrap_or_default();
            let body = match (&r.note, r.seen.is_empty(), r.not_seen.is_empty()) {
                (Some(note), _, _) => note.clone(),
                (None, true, _) => format!("never decided; not exercised: {}", list(&r.not_seen)),
                (None, false, true) => format!("exercised: {}", list(&r.seen)),
                (None, false, false) => format!(
                    "exercised: {}; not exercised: {}",
                    list(&r.seen),
                    list(&r.not_seen)
                ),
            };
            writeln!(f, "  {:<width$}  {body}{at}", r.rule)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::ruletest::{RunOptions, load_suite_each, run_suite};
    use crate::{SourceFile, compile};

    fn report(rules: &str, tests: &str, filter: Option<&str>) -> crate::ruletest::Report {
        let set = compile(vec![SourceFile::new("r.yaml", "r.yaml", rules)]).unwrap();
        let suite = load_suite_each(&set, &[SourceFile::new("t.yaml", "tests/t.yaml", tests)]);
        let options = RunOptions {
            seeds: 64,
            filter: filter.map(str::to_string),
            coverage: true,
            ..RunOptions::default()
        };
        run_suite(&set, &suite, options)
    }

    #[test]
    fn defaults_behind_a_catch_all_rule_count_for_nothing() {
        let rules = "version: 1\nrules:\n  - id: all\n    retry: { max_retries: 0 }\n";
        let tests = "version: 1\ncases:\n  - name: a\n    expect: { reason: max_retries }\n";
        let cov = report(rules, tests, None).coverage.unwrap();
        // `max_retries: 0` never retries, so only max_retries is reachable.
        assert_eq!((cov.covered, cov.total, cov.percent), (1, 1, 100.0));
        assert_eq!(
            cov.rules[1].note.as_deref(),
            Some("never decides: rule 'all' (r.yaml:3:5) matches every failure")
        );
    }

    #[test]
    fn a_filter_keeps_the_seeds_of_the_tests_it_keeps() {
        let rules =
            "version: 1\nrules:\n  - id: j\n    retry: { backoff: { fixed: 1s, jitter: full } }\n";
        let tests = "version: 1\ncases:\n  - name: one\n    expect: { delay: 1s }\n  - name: two\n    expect: { delay: 1s }\n";
        let all = report(rules, tests, None);
        let two = report(rules, tests, Some("two"));
        assert_eq!((two.filtered_out, two.results.len()), (1, 1));
        assert_eq!(two.results[0], all.results[1]);
    }
}
