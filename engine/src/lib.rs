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
//! - `types.rs`: the shared vocabulary ([`RuleId`], [`Label`], [`Version`], [`RuleRef`],
//!   [`GiveUpReason`], [`Decision`], [`Decided`]); `context.rs`: what a decision looks at
//!   ([`FailureContext`], [`OwnedFailure`]); `report.rs`: a decision as JSON
//!   ([`DecisionReport`]).
//! - [`backoff`]: a rule's retry policy, delays, jitter and clamping, and the pacing (steps
//!   3–7); `decide.rs`: the decision loop over a set (the first rule that decides, else the
//!   defaults) and its [`Explanation`].
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
mod context;
mod decide;
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
mod report;
pub mod rule;
pub mod ruletest;
pub mod schema;
pub mod script;
mod set;
#[cfg(feature = "testing")]
pub mod testing;
mod types;
mod yaml_errors;
mod yaml_seek;
mod yaml_view;

pub use compile::compile;
pub use context::{Attrs, FailureContext, OwnedFailure, SignalView, Signals};
pub use decide::{Explanation, TraceStep};
pub use diag::{Diagnostic, Pos, Rejected, Severity};
pub use handle::PolicyHandle;
pub use load::{SourceFile, read_dir};
pub use report::DecisionReport;
pub use set::{CompiledSet, Defaults};
pub use types::{Decided, Decision, GiveUpReason, Label, RuleId, RuleRef, Version};

/// Reads and compiles the rule set in `dir`.
///
/// An I/O error (the directory cannot be read) is distinct from a set that is wrong.
pub fn load_dir(dir: &std::path::Path) -> Result<Result<CompiledSet, Rejected>, std::io::Error> {
    Ok(compile(read_dir(dir)?))
}
