//! A compiled rule: its conditions, its guard, and what it decides.

use crate::backoff::RetryPolicy;
use crate::context::FailureContext;
use crate::diag::Pos;
use crate::duration::DurationDisplay;
use crate::pattern::{Cmp, NameMatcher};
use crate::script::Expr;
use crate::types::{Label, RuleId};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a rule decides once it matches.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// `give_up: true`: dead-letter at once.
    GiveUp,
    /// Retry by this policy (the rule's own fields over the defaults).
    Retry(Arc<RetryPolicy>),
}

/// The structured conditions of `match:`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conditions {
    /// Business type.
    pub biz: Option<NameMatcher>,
    /// Error code.
    pub code: Option<NameMatcher>,
    /// All must hold.
    pub attempt: Vec<Cmp<u64>>,
    /// All must hold.
    pub redrives: Vec<Cmp<u64>>,
    /// All must hold.
    pub elapsed: Vec<Cmp<Duration>>,
    /// Each named attribute must be present and match.
    pub attrs: Vec<(String, NameMatcher)>,
    /// Each named header of the message must be present and match.
    pub headers: Vec<(String, NameMatcher)>,
}

/// The first condition that failed, cheap to produce on the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// `biz` did not match.
    Biz,
    /// `code` did not match.
    Code,
    /// The `attempt` comparison at this index did not hold.
    Attempt(usize),
    /// The `redrives` comparison at this index did not hold.
    Redrives(usize),
    /// The `elapsed` comparison at this index did not hold.
    Elapsed(usize),
    /// The attribute condition at this index did not hold (absent or different).
    Attr(usize),
    /// The header condition at this index did not hold (absent or different).
    Header(usize),
}

impl Conditions {
    /// The first failing condition, or `None` when all hold.
    pub(crate) fn miss(&self, ctx: &FailureContext<'_>) -> Option<Miss> {
        if let Some(biz) = &self.biz
            && !biz.matches(ctx.biz)
        {
            return Some(Miss::Biz);
        }
        if let Some(code) = &self.code
            && !code.matches(ctx.code)
        {
            return Some(Miss::Code);
        }
        self.miss_beyond_names(ctx)
    }

    /// The first failing condition other than `biz` and `code`, for a rule whose names the
    /// index has already matched.
    pub(crate) fn miss_beyond_names(&self, ctx: &FailureContext<'_>) -> Option<Miss> {
        let attempt = u64::from(ctx.attempt);
        if let Some(i) = self.attempt.iter().position(|c| !c.holds(attempt)) {
            return Some(Miss::Attempt(i));
        }
        let redrives = u64::from(ctx.redrives);
        if let Some(i) = self.redrives.iter().position(|c| !c.holds(redrives)) {
            return Some(Miss::Redrives(i));
        }
        if let Some(i) = self.elapsed.iter().position(|c| !c.holds(ctx.elapsed)) {
            return Some(Miss::Elapsed(i));
        }
        if let Some(i) = self
            .attrs
            .iter()
            .position(|(name, m)| !ctx.attrs.get(name).is_some_and(|v| m.matches(v)))
        {
            return Some(Miss::Attr(i));
        }
        if let Some(i) = self
            .headers
            .iter()
            .position(|(name, m)| !ctx.headers.get(name).is_some_and(|v| m.matches(v)))
        {
            return Some(Miss::Header(i));
        }
        None
    }

    /// A sentence saying why `miss` failed for `ctx`.
    pub(crate) fn describe(&self, miss: Miss, ctx: &FailureContext<'_>) -> String {
        match miss {
            Miss::Biz => format!(
                "biz '{}' does not match {}",
                ctx.biz,
                self.biz
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ),
            Miss::Code => format!(
                "code '{}' does not match {}",
                ctx.code,
                self.code
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ),
            Miss::Attempt(i) => format!("attempt {} is not {}", ctx.attempt, self.attempt[i]),
            Miss::Redrives(i) => {
                format!("redrives {} is not {}", ctx.redrives, self.redrives[i])
            }
            Miss::Elapsed(i) => format!(
                "elapsed {} is not {}",
                DurationDisplay(ctx.elapsed),
                self.elapsed[i]
            ),
            Miss::Attr(i) => {
                let (name, m) = &self.attrs[i];
                match ctx.attrs.get(name) {
                    Some(v) => format!("attrs.{name} '{v}' does not match {m}"),
                    None => format!("attrs.{name} is absent (wanted {m})"),
                }
            }
            Miss::Header(i) => {
                let (name, m) = &self.headers[i];
                match ctx.headers.get(name) {
                    Some(v) => format!("headers.{name} '{v}' does not match {m}"),
                    None => format!("headers.{name} is absent (wanted {m})"),
                }
            }
        }
    }
}

/// One rule, ready to decide.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    /// Its id.
    pub id: RuleId,
    /// Its description.
    pub description: Option<String>,
    /// The file it came from.
    pub file: Arc<str>,
    /// Where its entry starts in that file.
    pub pos: Option<Pos>,
    /// `match:`.
    pub conditions: Conditions,
    /// `if:`.
    pub guard: Option<Expr>,
    /// What it decides.
    pub outcome: Outcome,
    /// Where a message goes when it is not retried.
    pub dead_letter: Label,
    /// Guard and script failures at decision time.
    pub(crate) errors: AtomicU64,
}

impl CompiledRule {
    /// How many times its guard or delay script failed while deciding.
    pub(crate) fn error_count(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    pub(crate) fn count_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Where it is written, as `FILE:LINE:COL` (or just `FILE`).
    pub(crate) fn at(&self) -> String {
        match self.pos {
            Some(p) => format!("{}:{p}", self.file),
            None => self.file.to_string(),
        }
    }

    /// Its retry policy, or `None` for a `give_up` rule.
    pub(crate) fn policy(&self) -> Option<&RetryPolicy> {
        match &self.outcome {
            Outcome::GiveUp => None,
            Outcome::Retry(p) => Some(p),
        }
    }
}
