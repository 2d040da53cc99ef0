//! rebound-runtime: the Storm-style stream runtime.
//!
//! At-least-once is the promise: every message a spout hands out ends either acked or
//! dead-lettered (stored, then reported), never lost and never both.
//!
//! # Module map
//!
//! - [`topology`]: the API a user writes: `Spout`, `Bolt`, `DeferredBolt`, tuples, groupings,
//!   the builder and the config.
//! - [`acker`]: Storm's XOR ledger with rotating timeout buckets, and the acker task.
//! - [`fate`]: the failure seam: `FailurePolicy` (retry or dead letter), `RetryQueue`,
//!   `DeadLetterSink`, and in-memory implementations of each.
//! - [`fairness`]: mixing due retries with new messages, and the retry fuse.
//! - [`stats`]: counters and a latency histogram for the metrics exporter.
//! - `executor` (private): the spout, bolt and acker tasks, start/shutdown
//!   ([`RunningTopology`]), and telling a stall at `max_spout_pending` from backpressure.
//! - [`time`]: one time model: monotonic instants to wait on, wall [`Timestamp`](time::Timestamp)s
//!   to persist, the [`TimeSource`](time::TimeSource) trait (tokio and manual), and
//!   [`TimeScale`](time::TimeScale). The only place that reads a clock.
//! - [`scheduler`]: `RetryScheduler`, the delay queue of message ids by due time (cancel,
//!   reschedule, drain in due order, async `next_due`).
//! - [`store`]: the `Store` trait (scheduled retries, dead letters, audit log, message fates,
//!   source positions), its embedded SQLite implementation, a group-commit `BatchWriter`, and
//!   `recover` to refill a scheduler after a restart.
//! - [`policy`]: the rule engine as the failure policy (`RulePolicy` over the live
//!   `PolicyHandle`), and `TimeScale` for `--time-scale`.
//! - [`durable`]: the failure seam backed by the store: a write-behind journal, durable retry
//!   queues (recovered after a restart), the dead-letter sink, acked fates and source positions.
//! - [`pipeline`]: the bundled order pipeline behind `rebound run` (order spout, parse bolt,
//!   idempotent store bolt with injected faults) and its report from the durable state.
//! - [`admin`]: the admin HTTP API (axum): rules, decide, health, metrics.
//! - [`metrics`]: the Prometheus registry and the spec's metric names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acker;
pub mod admin;
pub mod durable;
mod executor;
pub mod fairness;
pub mod fate;
pub mod metrics;
pub mod pipeline;
pub mod policy;
pub mod scheduler;
pub mod stats;
pub mod store;
pub mod time;
pub mod topology;

pub use executor::{RunningTopology, ShutdownReport};
