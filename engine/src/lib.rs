//! rebound-engine: Rebound's rule engine. It turns a directory of YAML rule files into fast,
//! exact retry decisions, as `docs/spec/rules.md` defines them.
//!
//! The way through the crate:
//!
//! - [`load`]: a directory → [`SourceFile`]s (name, bytes) and the set's version hash.
//! - [`model`]: what the YAML says (serde types that reject unknown keys).
//! - [`positions`]: where each value sits in its file, for diagnostics.
//! - [`compile()`]: every load-time check, then a [`CompiledSet`]; [`diag`] holds the
//!   diagnostics, [`lint`](crate::compile) the warnings.
//! - [`pattern`]: names, globs and comparisons of `match:`; [`script`]: sandboxed rhai.
//! - [`backoff`]: delays, jitter and clamping; [`decide`]: the context, the decision and the
//!   seven steps.
//! - [`PolicyHandle`]: the atomic pointer to the current set, the only way to decide.
//! - [`paths`]: the retry path of every rule as a table (`rebound paths`).
//! - [`ruletest`]: rule tests, the runner behind `rebound test` (runner: feature `testing`).
//! - [`schema`]: the JSON Schemas of rule files and test files, generated from [`model`].
//! - `testing` (feature `testing`): proptest strategies, `simulate_path` and property checks
//!   for users' own test suites.
//! - [`reload`]: new sets while deciding: the pipeline (validate → swap → history,
//!   rollback), the directory watcher, and the config-center pull client.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backoff;
mod compile;
pub mod decide;
pub mod diag;
pub mod duration;
mod handle;
mod index;
mod lint;
pub mod load;
pub mod model;
pub mod paths;
pub mod pattern;
pub mod positions;
pub mod reload;
pub mod rule;
pub mod ruletest;
pub mod schema;
pub mod script;
mod set;
#[cfg(feature = "testing")]
pub mod testing;
mod yaml_errors;
mod yaml_seek;
mod yaml_view;

pub use compile::compile;
pub use decide::{
    Attrs, Decided, Decision, DecisionReport, FailureContext, GiveUpReason, Label, OwnedFailure,
    RuleId, RuleRef, Signals, Version,
};
pub use diag::{Diagnostic, Pos, Rejected, Severity};
pub use handle::PolicyHandle;
pub use load::{SourceFile, read_dir};
pub use set::{CompiledSet, Defaults, Explanation, TraceStep};

/// Reads and compiles the rule set in `dir`.
///
/// An I/O error (the directory cannot be read) is distinct from a set that is wrong.
pub fn load_dir(dir: &std::path::Path) -> Result<Result<CompiledSet, Rejected>, std::io::Error> {
    Ok(compile(read_dir(dir)?))
}
