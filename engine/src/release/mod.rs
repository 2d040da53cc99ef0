//! Releasing a rule set safely (`docs/spec/release.md`): what the runtime, the stores and the
//! product agree on when a set is tried before it decides for everyone.
//!
//! - [`LoggedDecision`] (`logged.rs`): one decision as the decision log keeps it, its whole
//!   context ([`LoggedContext`], the shape of `POST /v1/decide`'s body, seed included) and
//!   its outcome ([`Outcome`]). One type from the runtime to either store and back.
//! - [`jitter_seed`]: the seed a runtime decision's jitter is drawn from, a stable function of
//!   the message and the attempt, kept in the context, so that deciding a logged context
//!   again with the same set gives the same delay.
//! - [`Verdict`] (`change.rs`): what a comparison of two decisions looks at (rule, action,
//!   label), for what-if and the shadow.
//! - [`Slice`] (`arm.rs`): who is in a canary, by biz and a stable hash of the ordering key.
//! - [`Guard`] and [`judge`] (`guard.rs`): a canary's guard and what its two arms' figures
//!   ([`ArmFigures`]) say should happen: run on, roll back, promote, or hold.
//! - [`what_if`] (`whatif.rs`): what a candidate set would have decided for every logged
//!   context, compared with what was decided ([`WhatIf`], the JSON of `rebound whatif`).

mod arm;
mod change;
mod guard;
mod logged;
mod whatif;

pub use arm::{Arm, Slice, stable_hash};
pub use change::{ShadowReport, ShadowRow, Verdict, changed};
pub use guard::{
    ArmFigures, Arms, Breach, DEFAULT_DEAD_LETTER_RATIO, DEFAULT_MIN_SAMPLES, DEFAULT_RETRY_RATIO,
    Guard, GuardError, Judgement, Relative, judge,
};
pub use logged::{LoggedContext, LoggedDecision, LoggedSignals, Outcome, jitter_seed};
pub use whatif::{ChangeRow, DelaySides, EXAMPLES, Quantiles, WhatIf, outcome_changed, what_if};
