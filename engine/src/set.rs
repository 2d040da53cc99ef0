//! A compiled rule set: the rules in first-match order, the index over them, the defaults,
//! and what callers may read of them. `decide.rs` holds the decision loop over a set.

use crate::adaptive::{BreakerPolicy, BudgetPolicy};
use crate::backoff::RetryPolicy;
use crate::context::FailureContext;
use crate::diag::{Diagnostic, Pos};
use crate::heat::HeatPolicy;
use crate::index::RuleIndex;
use crate::labels::Labels;
use crate::load::SourceFile;
use crate::rule::CompiledRule;
use crate::script::ScriptEngine;
use crate::types::{Label, RuleId, Version};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What decides when no rule matches.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// The resolved default policy.
    pub policy: Arc<RetryPolicy>,
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
    pub(crate) labels: Labels,
    pub(crate) budgets: Vec<BudgetPolicy>,
    pub(crate) breakers: Vec<BreakerPolicy>,
    pub(crate) heat: HeatPolicy,
    pub(crate) index: RuleIndex,
    pub(crate) scripts: ScriptEngine,
    pub(crate) warnings: Vec<Diagnostic>,
    pub(crate) defaults_errors: AtomicU64,
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
    pub fn rules(&self) -> impl ExactSizeIterator<Item = RuleView<'_>> + DoubleEndedIterator {
        self.rules.iter().map(RuleView)
    }

    /// The rule with `id`, if the set has one.
    pub fn rule(&self, id: RuleId) -> Option<RuleView<'_>> {
        self.rules.iter().find(|r| r.id == id).map(RuleView)
    }

    /// What decides when no rule matches.
    pub fn defaults(&self) -> &Defaults {
        &self.defaults
    }

    /// The labels its files define, with their policies (empty when none does).
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Its retry budgets, in file order.
    pub fn budgets(&self) -> &[BudgetPolicy] {
        &self.budgets
    }

    /// Its breakers, in file order.
    pub fn breakers(&self) -> &[BreakerPolicy] {
        &self.breakers
    }

    /// The budget a failure falls under: the first, in file order, whose `match` holds.
    pub fn budget_for(&self, ctx: &FailureContext<'_>) -> Option<&BudgetPolicy> {
        self.budgets.iter().find(|b| b.scope.matches(ctx))
    }

    /// The breakers a failure falls under: every one whose `match` holds.
    pub fn breakers_for<'s>(
        &'s self,
        ctx: &'s FailureContext<'_>,
    ) -> impl Iterator<Item = &'s BreakerPolicy> + 's {
        self.breakers.iter().filter(move |b| b.scope.matches(ctx))
    }

    /// How failures heat up (`heat:`): its half-life and each code's weight; the defaults
    /// (30 s, every code 1) when no file has the section.
    pub fn heat(&self) -> &HeatPolicy {
        &self.heat
    }

    /// Warnings found at load (the set loaded anyway).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The sandboxed engine its expressions run on.
    pub(crate) fn scripts(&self) -> &ScriptEngine {
        &self.scripts
    }

    /// Failures of the defaults' delay script while deciding.
    pub fn defaults_error_count(&self) -> u64 {
        self.defaults_errors.load(Ordering::Relaxed)
    }
}

/// One rule of a set, as a caller sees it: its id, where it is written and what it decides.
///
/// ```
/// use rebound_engine::{RuleId, SourceFile, compile};
///
/// let yaml = "version: 1\nrules:\n  - id: bad-json\n    match: { code: BAD_JSON }\n    give_up: true\n    dead_letter: L3\n  - id: fast\n    retry: { max_retries: 2 }\n";
/// let set = compile(vec![SourceFile::new("a.yaml", "rules/a.yaml", yaml)]).unwrap();
/// let ids: Vec<&str> = set.rules().map(|r| r.id().as_str()).collect();
/// assert_eq!(ids, ["bad-json", "fast"]);
/// let bad = set.rule(RuleId::from("bad-json")).unwrap();
/// assert!(bad.policy().is_none());
/// assert_eq!((bad.dead_letter().as_str(), bad.at()), ("L3", "rules/a.yaml:3:5".to_string()));
/// assert_eq!(set.rule(RuleId::from("fast")).unwrap().policy().unwrap().max_retries, 2);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RuleView<'a>(&'a CompiledRule);

impl<'a> RuleView<'a> {
    /// Its id.
    pub fn id(&self) -> RuleId {
        self.0.id
    }

    /// Its description, if it has one.
    pub fn description(&self) -> Option<&'a str> {
        self.0.description.as_deref()
    }

    /// The file it is written in, as diagnostics name it.
    pub fn file(&self) -> &'a str {
        &self.0.file
    }

    /// Where its entry starts in that file.
    pub fn pos(&self) -> Option<Pos> {
        self.0.pos
    }

    /// Where it is written, as `FILE:LINE:COL` (or just `FILE`).
    pub fn at(&self) -> String {
        self.0.at()
    }

    /// Its retry policy (its own fields over the defaults), or `None` for a `give_up` rule.
    pub fn policy(&self) -> Option<&'a RetryPolicy> {
        self.0.policy()
    }

    /// Where a message goes when this rule does not retry it.
    pub fn dead_letter(&self) -> Label {
        self.0.dead_letter
    }

    /// How many times its guard or delay script failed while deciding.
    pub fn error_count(&self) -> u64 {
        self.0.error_count()
    }
}
