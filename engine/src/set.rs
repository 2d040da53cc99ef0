//! A compiled rule set: the rules in first-match order, the index over them, the defaults,
//! and the decision loop that walks candidates until one rule decides.

use crate::backoff::{Backoff, Policy};
use crate::decide::{Decided, Decision, FailureContext, Label, Paced, RuleRef, Version};
use crate::diag::{Diagnostic, Pos};
use crate::index::{Candidate, RuleIndex};
use crate::load::SourceFile;
use crate::rule::{CompiledRule, Outcome};
use crate::script::ScriptEngine;
use rand::Rng;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What decides when no rule matches.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// The resolved default policy.
    pub policy: Arc<Policy>,
    /// The default dead-letter label (`default` unless the set says otherwise).
    pub dead_letter: Label,
    /// The file that declared `defaults:`, if any.
    pub file: Option<Arc<str>>,
    /// Where it declared them.
    pub pos: Option<Pos>,
}

/// A validated, compiled, immutable rule set. Decide through a
/// [`PolicyHandle`](crate::PolicyHandle).
#[derive(Debug)]
pub struct CompiledSet {
    pub(crate) version: Version,
    pub(crate) files: Vec<SourceFile>,
    pub(crate) rules: Vec<CompiledRule>,
    pub(crate) defaults: Defaults,
    pub(crate) index: RuleIndex,
    pub(crate) scripts: ScriptEngine,
    pub(crate) warnings: Vec<Diagnostic>,
    pub(crate) defaults_errors: AtomicU64,
}

/// One step of an explanation: a rule considered, and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStep {
    /// The rule's id.
    pub rule: String,
    /// Where it is defined, as `FILE:LINE:COL`.
    pub at: String,
    /// `matched`, `no_match`, `guard_false`, `guard_error` or `script_error`.
    pub result: &'static str,
    /// Which condition failed, or the guard's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A decision with the trace of how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The decision.
    pub decided: Decided,
    /// Every rule considered, in order, up to the one that decided.
    pub trace: Vec<TraceStep>,
    /// Set when the defaults' own delay script failed and the built-in backoff was used.
    pub defaults_note: Option<String>,
}

/// How the decision loop reports its steps; `()` reports nothing.
trait Tracer {
    fn step(&mut self, rule: &CompiledRule, result: &'static str, detail: impl FnOnce() -> String);
}

impl Tracer for () {
    #[inline]
    fn step(&mut self, _: &CompiledRule, _: &'static str, _: impl FnOnce() -> String) {}
}

impl Tracer for Vec<TraceStep> {
    fn step(&mut self, rule: &CompiledRule, result: &'static str, detail: impl FnOnce() -> String) {
        let at = match rule.pos {
            Some(p) => format!("{}:{p}", rule.file),
            None => rule.file.to_string(),
        };
        let detail = detail();
        self.push(TraceStep {
            rule: rule.id.to_string(),
            at,
            result,
            detail: (!detail.is_empty()).then_some(detail),
        });
    }
}

/// Rules `0..n`, none of whose conditions is known to hold: a linear scan.
fn every_rule(n: usize) -> impl Iterator<Item = Candidate> {
    (0..n).map(|rule| Candidate {
        rule,
        names_hold: false,
    })
}

impl CompiledSet {
    /// The set's version: a hash of its file names and bytes.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// The files it was compiled from, in name order.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The rules in first-match order.
    pub fn rules(&self) -> &[CompiledRule] {
        &self.rules
    }

    /// What decides when no rule matches.
    pub fn defaults(&self) -> &Defaults {
        &self.defaults
    }

    /// Warnings found at load (the set loaded anyway).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The sandboxed engine its expressions run on.
    pub fn scripts(&self) -> &ScriptEngine {
        &self.scripts
    }

    /// Failures of the defaults' delay script while deciding.
    pub fn defaults_error_count(&self) -> u64 {
        self.defaults_errors.load(Ordering::Relaxed)
    }

    /// Decides through the index (the fast path).
    pub(crate) fn decide<R: Rng + ?Sized>(&self, ctx: &FailureContext<'_>, rng: &mut R) -> Decided {
        let mut candidates = self.index.candidates(ctx.biz, ctx.code);
        self.decide_among(&mut candidates, ctx, rng, &mut ()).0
    }

    /// Decides by scanning every rule in order: the naive reference the index must agree
    /// with, and the baseline of the benchmarks.
    pub(crate) fn decide_by_scan<R: Rng + ?Sized>(
        &self,
        ctx: &FailureContext<'_>,
        rng: &mut R,
    ) -> Decided {
        self.decide_among(every_rule(self.rules.len()), ctx, rng, &mut ())
            .0
    }

    /// Decides by scanning every rule, recording why each one did or did not decide.
    pub(crate) fn explain<R: Rng + ?Sized>(
        &self,
        ctx: &FailureContext<'_>,
        rng: &mut R,
    ) -> Explanation {
        let mut trace = Vec::new();
        let (decided, defaults_note) =
            self.decide_among(every_rule(self.rules.len()), ctx, rng, &mut trace);
        Explanation {
            decided,
            trace,
            defaults_note,
        }
    }

    fn decide_among<R: Rng + ?Sized>(
        &self,
        candidates: impl Iterator<Item = Candidate>,
        ctx: &FailureContext<'_>,
        rng: &mut R,
        tracer: &mut impl Tracer,
    ) -> (Decided, Option<String>) {
        for candidate in candidates {
            let rule = &self.rules[candidate.rule];
            let miss = if candidate.names_hold {
                rule.conditions.miss_beyond_names(ctx)
            } else {
                rule.conditions.miss(ctx)
            };
            if let Some(miss) = miss {
                tracer.step(rule, "no_match", || rule.conditions.describe(miss, ctx));
                continue;
            }
            if let Some(guard) = &rule.guard {
                match self.scripts.guard(guard, ctx) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracer.step(rule, "guard_false", || {
                            format!("if: {} was false", guard.source())
                        });
                        continue;
                    }
                    Err(e) => {
                        rule.count_error();
                        tracer.step(rule, "guard_error", || {
                            format!("if: {}: {e}", guard.source())
                        });
                        continue;
                    }
                }
            }
            let by = RuleRef::Rule(rule.id);
            let decision = match &rule.outcome {
                Outcome::GiveUp => Paced::Stop(crate::GiveUpReason::GiveUp),
                Outcome::Retry(policy) => match policy.pace(ctx, rng, &self.scripts) {
                    Ok(paced) => paced,
                    Err(e) => {
                        rule.count_error();
                        tracer.step(rule, "script_error", || format!("backoff script: {e}"));
                        continue;
                    }
                },
            };
            tracer.step(rule, "matched", String::new);
            return (self.decided(decision, by, &rule.dead_letter), None);
        }
        let defaults = &self.defaults;
        let (paced, note) = match defaults.policy.pace(ctx, rng, &self.scripts) {
            Ok(paced) => (paced, None),
            Err(e) => {
                // The defaults cannot be skipped: fall back to the built-in backoff.
                self.defaults_errors.fetch_add(1, Ordering::Relaxed);
                let builtin = Policy {
                    backoff: Backoff::default(),
                    ..(*defaults.policy).clone()
                };
                let paced = builtin
                    .pace(ctx, rng, &self.scripts)
                    .unwrap_or(Paced::Stop(crate::GiveUpReason::MaxRetries));
                (
                    paced,
                    Some(format!(
                        "defaults backoff script failed ({e}); used the built-in backoff"
                    )),
                )
            }
        };
        (
            self.decided(paced, RuleRef::Defaults, &defaults.dead_letter),
            note,
        )
    }

    fn decided(&self, paced: Paced, rule: RuleRef, label: &Label) -> Decided {
        let decision = match paced {
            Paced::Retry(delay) => Decision::Retry { delay, rule },
            Paced::Stop(reason) => Decision::DeadLetter {
                label: *label,
                reason,
                rule,
            },
        };
        Decided {
            decision,
            version: self.version,
        }
    }
}
