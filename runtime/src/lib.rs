//! rebound-runtime: the Storm-style stream runtime (topology, acker, scheduler, store, admin API).
//!
//! # Module map
//!
//! - [`clock`]: `Timestamp` and the `Clock` trait (wall, scaled for `--time-scale`, manual for
//!   tests). The only place that reads the system time.
//! - [`scheduler`]: `RetryScheduler`, the delay queue of message ids by due time (cancel,
//!   reschedule, drain in due order, async `next_due`).
//! - [`store`]: the `Store` trait (scheduled retries, dead letters, audit log, message fates,
//!   source positions), its embedded SQLite implementation, a group-commit `BatchWriter`, and
//!   `recover` to refill a scheduler after a restart.
//! - [`admin`]: the admin HTTP API (axum): rules, decide, health, metrics.
//! - [`metrics`]: the Prometheus registry and the spec's metric names.
#![forbid(unsafe_code)]

pub mod admin;
pub mod clock;
pub mod metrics;
pub mod scheduler;
pub mod store;
