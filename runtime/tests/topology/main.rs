//! The topology runtime on its own, in memory: at-least-once under injected faults
//! (`topology_at_least_once`), the field's failure modes (`topology_handles`), fairness and
//! the retry fuse (`topology_fairness`), and the models behind them: the acker's XOR ledger
//! (`acker_model`) and the retry scheduler (`scheduler_model`, `scheduler_async`).

#[path = "../common/mod.rs"]
mod common;

mod acker_model;
mod scheduler_async;
mod scheduler_model;
mod topology_at_least_once;
mod topology_fairness;
mod topology_handles;
