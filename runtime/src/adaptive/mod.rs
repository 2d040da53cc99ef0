//! The runtime's side of adaptive retries (`operations.md`, "Adaptive retries at run time"):
//! the state the rule set's `budgets:` and `breakers:` describe, kept per process.

pub mod breaker;
pub mod budget;
pub mod gate;
pub use breaker::{Breaker, BreakerLimits, BreakerState, ramp_share};
pub use budget::{Budget, BudgetLimits};
pub use gate::{GateSnapshot, RetryGate};
