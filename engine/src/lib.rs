//! rebound-engine: Rebound's rule engine. It turns a directory of YAML rule files into fast,
//! exact retry decisions, as `docs/spec/rules.md` defines them.
//!
//! The public API is what is re-exported here (the vocabulary, [`compile()`], [`load_dir`],
//! [`PolicyHandle`], [`CompiledSet`] and its views) and the public modules: [`backoff`],
//! [`diag`], [`duration`], [`load`], [`paths`], [`reload`], [`ruletest`], [`schema`],
//! [`wall_time`] and `testing`. Every other module is the crate's own.
//!
//! The way through the crate:
//!
//! - `types.rs`: the shared vocabulary the runtime uses as it is: [`RuleId`], [`Label`],
//!   [`Version`], [`RuleRef`], [`GiveUpReason`], [`Decision`], [`Decided`].
//! - `context.rs`: what a decision looks at: [`FailureContext`] with its [`SignalView`],
//!   [`OwnedFailure`]. `report.rs`: a decision as JSON ([`DecisionReport`]).
//! - [`wall_time`]: `now` as rules see it: RFC 3339 in and out, `hour_of_day`, `day_of_week`.
//! - [`load`]: a directory → [`SourceFile`]s (name, bytes) and the set's version hash;
//!   [`duration`]: durations as rule files write them (`1.5s`, `2m`).
//! - `model.rs`: what the YAML says (serde types that reject unknown keys); `positions.rs`
//!   and `yaml_*.rs`: where each value sits in its file, for diagnostics, and
//!   (`yaml_syntax.rs`) YAML syntax errors in a rule author's words, indentation mistakes
//!   (`yaml_indent.rs`) among them; `yaml_depth.rs`: the nesting bound (64), checked before
//!   serde_yaml parses deeper.
//! - [`compile()`] (`compile.rs`): every load-time check, then a [`CompiledSet`] (`set.rs`,
//!   read through views such as [`RuleView`]); [`diag`] holds the diagnostics, `lint/` the
//!   warnings (one file per lint).
//! - `rule.rs`: a compiled rule; `pattern.rs`: names, globs and comparisons of `match:`;
//!   `index.rs`: the decision tree over biz and code; `script/`: sandboxed rhai.
//! - [`backoff`]: a rule's [`RetryPolicy`](backoff::RetryPolicy), delays, jitter and clamping,
//!   and the pacing (steps 3–7); `decide.rs`: the decision loop over a set (the first rule
//!   that decides, else the defaults) and its [`Explanation`].
//! - [`PolicyHandle`] (`handle.rs`): the one atomic pointer to the set in force, the only
//!   way to decide.
//! - `labels.rs`: the set's dead-letter labels and their policies ([`LabelPolicy`]: redrive,
//!   alert, sla, expire), read through [`CompiledSet::labels`].
//! - `heat.rs`: the set's `heat:` ([`HeatPolicy`]: half-life, weights by code), read through
//!   [`CompiledSet::heat`]; checked in `compile/heat.rs`.
//! - [`paths`]: the retry path of every rule as a table and CSV (`rebound paths`), and each
//!   path as an SVG chart ([`paths::RetryPath::to_svg`], `paths --svg`, `GET /v1/paths/{rule}.svg`).
//! - [`ruletest`]: rule tests, the runner behind `rebound test` (runner: feature `testing`).
//! - [`schema`]: the JSON Schemas of rule files and test files, generated from the models.
//! - [`fmt`]: `rebound fmt`: rule and test files in the spec's key order, comments kept, and
//!   refused unless the formatted set decides as the original does.
//! - `testing/` (feature `testing`): `simulate_path`, proptest strategies and property
//!   checks for users' own test suites.
//! - [`reload`]: new sets while deciding: the reloader (validate → swap → history,
//!   rollback one step or to any of the last 50 accepted versions, whose files the history
//!   keeps), the directory watcher (feature `watch`), and the config-center pull client
//!   (feature `pull`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod adaptive;
pub mod backoff;
mod compile;
mod context;
mod decide;
pub mod diag;
pub mod duration;
pub mod fmt;
mod handle;
mod heat;
mod index;
mod labels;
mod lint;
pub mod load;
mod model;
pub mod paths;
mod pattern;
mod positions;
pub mod release;
pub mod reload;
mod report;
mod rule;
pub mod ruletest;
pub mod schema;
mod script;
mod set;
#[cfg(feature = "testing")]
pub mod testing;
mod types;
pub mod wall_time;
mod yaml_depth;
mod yaml_errors;
mod yaml_indent;
mod yaml_seek;
mod yaml_syntax;
mod yaml_view;

pub use adaptive::{BreakerPolicy, BudgetPolicy, Exhausted, NO_KEY, PerKey, Scope};
pub use compile::compile;
pub use context::{Attrs, FailureContext, HeaderMap, OwnedFailure, SignalView, Signals};
pub use decide::{Explanation, TraceStep};
pub use diag::{Diagnostic, Pos, Rejected, Severity};
pub use handle::PolicyHandle;
pub use heat::{HeatPolicy, HeatWeight};
pub use labels::{LabelPolicy, Labels, Redrive};
pub use load::{SourceFile, read_dir};
pub use report::DecisionReport;
pub use set::{CompiledSet, Defaults, RuleView};
pub use types::{Decided, Decision, GiveUpReason, Label, NotAVersion, RuleId, RuleRef, Version};

/// Reads and compiles the rule set in `dir`.
///
/// An I/O error (the directory cannot be read) is distinct from a set that is wrong.
pub fn load_dir(dir: &std::path::Path) -> Result<Result<CompiledSet, Rejected>, std::io::Error> {
    Ok(compile(read_dir(dir)?))
}
