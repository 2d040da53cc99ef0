//! Releasing a rule set safely, the product's side (`docs/spec/release.md`, "Shadow" and
//! "Canary"): what the admin routes, the canary's controller, the metrics and the console
//! share.
//!
//! - [`ReleaseSide`]: what the product asks of the runtime's shadow and canary (one per
//!   process; the runtime's `Release` implements it in `runtime_side.rs`). The product never
//!   decides: it installs sets, reads the figures and clears.
//! - [`ShadowDesk`] (`shadow.rs`): the shadow set installed through the admin API, and the
//!   process-wide totals of `rebound_shadow_decisions_total` across shadows.
//! - [`CanaryDesk`] (`canary.rs`): the one canary of the process: its files, slice, guard,
//!   `promote_after`, state, since and reason, kept after it ends so that `GET
//!   /v1/rules/canary` shows how the last one ended. Its `tick` judges the running canary
//!   ([`rebound_engine::release::judge`]) and promotes or rolls it back.
//! - `controller.rs`: the task that ticks the desk every [`TICK`] while the process runs.
//! - `json.rs`: the JSON of an arm, of the arms, and of the shadow's report.

mod canary;
mod controller;
pub mod json;
mod runtime_side;
mod shadow;

pub use canary::{CanaryDesk, CanaryRequest, CanaryState, CanaryView, StartError};
pub use controller::{TICK, spawn_controller};
pub use shadow::{ShadowDesk, ShadowRowView, ShadowView};

use rebound_engine::CompiledSet;
use rebound_engine::release::{Arms, Slice};
use std::sync::Arc;

/// What the product asks of the runtime's shadow and canary. Installing replaces what was
/// there and starts its counters from zero.
pub trait ReleaseSide: Send + Sync + std::fmt::Debug {
    /// Installs `set` as the shadow: it decides every failure too, and is never acted on.
    fn set_shadow(&self, set: Arc<CompiledSet>);
    /// Removes the shadow; false when there was none.
    fn clear_shadow(&self) -> bool;
    /// The shadow's report so far.
    fn shadow(&self) -> Option<ShadowView>;
    /// Installs `set` as the canary for the messages of `slice`.
    fn set_canary(&self, set: Arc<CompiledSet>, slice: Slice);
    /// Removes the canary and answers its final figures; `None` when there was none.
    fn clear_canary(&self) -> Option<Arms>;
    /// The running canary's figures so far.
    fn canary(&self) -> Option<Arms>;
}

/// The shadow and the canary of one process, for the admin routes and the metrics.
#[derive(Debug)]
pub struct ReleaseDesk {
    /// The shadow.
    pub shadow: ShadowDesk,
    /// The canary.
    pub canary: CanaryDesk,
}

impl ReleaseDesk {
    /// The desks over `side` (the runtime's release) and `reloader` (what a promotion goes
    /// through and where history is kept).
    pub fn new(
        side: Arc<dyn ReleaseSide>,
        reloader: Arc<rebound_engine::reload::Reloader>,
    ) -> ReleaseDesk {
        ReleaseDesk {
            shadow: ShadowDesk::new(Arc::clone(&side)),
            canary: CanaryDesk::new(side, reloader),
        }
    }
}
