//! The topology runtime on its own, in memory: at-least-once under injected faults
//! (`topology_at_least_once`), the field's failure modes (`topology_handles`), fairness and
//! the retry fuse (`topology_fairness`), fault heat in the signals (`topology_heat`), budgets and breakers
//! (`topology_gate`), one budget and one breaker state for several nodes
//! (`topology_fleet_gate`), ordered keys against their model (`topology_ordered`), the retry
//! scheduler against its model (`scheduler_model`, `scheduler_async`), and the scheduler's
//! honesty (`topology_honesty`: retries' lateness, fates' wait after the acker). The acker's
//! model test is a unit test beside it.

#[path = "../common/mod.rs"]
mod common;

mod scheduler_async;
mod scheduler_model;
mod topology_at_least_once;
mod topology_fairness;
mod topology_fleet_gate;
mod topology_gate;
mod topology_handles;
mod topology_heat;
mod topology_honesty;
mod topology_ordered;
