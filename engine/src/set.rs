//! A compiled rule set: the rules in first-match order, the index over them, the defaults,
//! and what callers may read of them. `decide.rs` holds the decision loop over a set.

use crate::backoff::RetryPolicy;
use crate::diag::{Diagnostic, Pos};
use crate::index::RuleIndex;
use crate::load::SourceFile;
use crate::rule::CompiledRule;
use crate::script::ScriptEngine;
use crate::types::{Label, Version};
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
}
