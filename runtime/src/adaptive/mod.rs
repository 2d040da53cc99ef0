//! The runtime's adaptive state: what it keeps between failures and shows the rules as
//! signals, and the budgets and breakers it applies after the rules decide (`operations.md`,
//! "Adaptive retries at run time"). The rule set declares them; the runtime keeps one state
//! per running topology, shared by its spout tasks.
//!
//! - [`Heat`] (`heat.rs`): each failure's weight added to its biz's heat, halving every
//!   half-life; a decision sees `signals.heat` and `signals.heat_total`.
//! - [`Budget`] (`budget.rs`) and [`Breaker`] (`breaker.rs`): one budget's sliding window, one
//!   breaker's state machine; [`Fuse`] (`fuse.rs`): the configuration's fuse, the breaker
//!   for everything; [`RetryGate`] (`gate.rs`): the fuse and all of the set's, between a
//!   decision and a retry's firing.
//! - On a shared store, the fleet's (`operations.md`, "One fleet, one budget"): [`FleetState`]
//!   (`fleet.rs`), the seam a shared store implements; `share.rs`, a budget's share of what
//!   the fleet left; `gate_fleet.rs`, the gate's counts for the fleet and the totals it read;
//!   [`FleetSync`] (`sync.rs`), the one thread that syncs them; [`MemoryFleet`]
//!   (`memory_fleet.rs`), the plain model of a shared store's side, for tests.

pub mod breaker;
pub mod budget;
pub mod fleet;
pub mod fuse;
pub mod gate;
mod gate_fleet;
mod heat;
mod memory_fleet;
pub mod share;
mod sync;

pub use breaker::{Breaker, BreakerLimits, BreakerState, Opening, ramp_share};
pub use budget::{Budget, BudgetLimits};
pub use fleet::{
    BreakerRecord, Counter, CounterOf, FleetState, LIVE_WITHIN, Opening as FleetOpening, Push,
    SYNC_EVERY, Scope, Totals,
};
pub use fuse::{FUSE, FailWindow, Fuse};
pub use gate::{BreakerView, FuseView, GateSnapshot, NO_KEY, RetryGate};
pub use heat::{COLD, Heat, MAX_BIZ};
pub use memory_fleet::{MemoryFleet, MemoryFleetNode};
pub use sync::{FleetSync, SyncParts};

use tokio::time::Instant;

use crate::fate::FailurePolicy;

/// Adds a failure of `biz` with `code` to `heat`, weighed and cooling as `policy` says (the
/// rule set's, so a reload's half-life counts from the next failure), and reads what its
/// decision sees: `(signals.heat, signals.heat_total)`. Called by the spout task before it
/// asks `policy` to decide, so the decision sees its own failure.
pub(crate) fn heat_of_failure(
    heat: &Heat,
    policy: &dyn FailurePolicy,
    biz: &str,
    code: &str,
    now: Instant,
) -> (f64, f64) {
    heat.set_half_life(policy.heat_half_life());
    heat.add_and_read(biz, policy.heat_weight(code), now)
}
