//! The decision: the spec's procedure over a compiled set. Candidates come from the index
//! (or, for the reference scan and explanations, every rule in order); the first rule whose
//! conditions hold and whose guard passes decides through its policy's pacing (steps 3–7,
//! in `backoff.rs`); when none does, the defaults decide.

use crate::backoff::{Backoff, PaceRecorder, Paced, Pacing, RetryPolicy};
use crate::context::FailureContext;
use crate::index::Candidate;
use crate::rule::{CompiledRule, Outcome};
use crate::set::CompiledSet;
use crate::types::{Decided, Decision, GiveUpReason, Label, RuleRef};
use rand::Rng;
use serde::Serialize;
use std::sync::atomic::Ordering;

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
    /// How the deciding policy came to its delay (steps 3–7), or `None` for `give_up`.
    pub pacing: Option<Pacing>,
}

/// How the decision loop reports its steps; `()` reports nothing.
trait Tracer {
    /// Where pacing writes its arithmetic.
    type Pace: PaceRecorder;
    fn step(&mut self, rule: &CompiledRule, result: &'static str, detail: impl FnOnce() -> String);
    fn pace(&mut self) -> &mut Self::Pace;
}

impl Tracer for () {
    type Pace = ();
    #[inline]
    fn step(&mut self, _: &CompiledRule, _: &'static str, _: impl FnOnce() -> String) {}
    #[inline]
    fn pace(&mut self) -> &mut () {
        self
    }
}

/// What `explain` records: the rules considered, and the arithmetic of the last pacing.
#[derive(Default)]
struct Recording {
    steps: Vec<TraceStep>,
    pacing: Option<Pacing>,
}

impl Tracer for Recording {
    type Pace = Option<Pacing>;

    fn step(&mut self, rule: &CompiledRule, result: &'static str, detail: impl FnOnce() -> String) {
        // Only the deciding rule's pacing explains the delay; a rule passed over (a delay
        // script that failed) leaves none behind.
        if result != "matched" {
            self.pacing = None;
        }
        let detail = detail();
        self.steps.push(TraceStep {
            rule: rule.id.to_string(),
            at: rule.at(),
            result,
            detail: (!detail.is_empty()).then_some(detail),
        });
    }

    fn pace(&mut self) -> &mut Option<Pacing> {
        &mut self.pacing
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
    /// Decides through the index (the fast path). The set in force decides through
    /// [`PolicyHandle`](crate::PolicyHandle); this is for a set that is not (yet) in force: a
    /// candidate's what-if, a shadow, a canary (`release.md`).
    pub fn decide<R: Rng + ?Sized>(&self, ctx: &FailureContext<'_>, rng: &mut R) -> Decided {
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
        let mut rec = Recording::default();
        let (decided, defaults_note) =
            self.decide_among(every_rule(self.rules.len()), ctx, rng, &mut rec);
        Explanation {
            decided,
            trace: rec.steps,
            defaults_note,
            pacing: rec.pacing,
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
                Outcome::GiveUp => Paced::Stop(GiveUpReason::GiveUp),
                Outcome::Retry(policy) => match policy.pace(ctx, rng, &self.scripts, tracer.pace())
                {
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
        let (paced, note) = match defaults.policy.pace(ctx, rng, &self.scripts, tracer.pace()) {
            Ok(paced) => (paced, None),
            Err(e) => {
                // The defaults cannot be skipped: fall back to the built-in backoff.
                self.defaults_errors.fetch_add(1, Ordering::Relaxed);
                let builtin = RetryPolicy {
                    backoff: Backoff::default(),
                    ..(*defaults.policy).clone()
                };
                let paced = builtin
                    .pace(ctx, rng, &self.scripts, tracer.pace())
                    .unwrap_or(Paced::Stop(GiveUpReason::MaxRetries));
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
