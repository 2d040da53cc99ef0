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
//! - [`stats`]: counters and a latency histogram, for whoever exports metrics.
//! - [`time_source`]: monotonic and wall-clock time (tokio's clock by default).
//! - `executor` (private): the spout, bolt and acker tasks, start/shutdown
//!   ([`RunningTopology`]), and telling a stall at `max_spout_pending` from backpressure.
//! - [`clock`]: `Timestamp` and the `Clock` trait (wall, scaled for `--time-scale`, manual for
//!   tests). The only place that reads the system time.
//! - [`scheduler`]: `RetryScheduler`, the delay queue of message ids by due time (cancel,
//!   reschedule, drain in due order, async `next_due`).
//! - [`store`]: the `Store` trait (scheduled retries, dead letters, audit log, message fates,
//!   source positions), its embedded SQLite implementation, a group-commit `BatchWriter`, and
//!   `recover` to refill a scheduler after a restart.
//! - [`policy`]: the rule engine as the failure policy (`RulePolicy` over the live
//!   `PolicyHandle`), and `TimeScale` for `--time-scale`.
//! - [`durable`]: the failure seam backed by the store: a write-behind journal, durable retry
//!   queues (recovered after a restart), the dead-letter sink, acked fates and source positions.
//!
//! The product built on it (the bundled order pipeline, the admin API, the metrics exposition,
//! the progress view) lives in the `rebound` package's library, not here: the runtime knows
//! nothing of HTTP, progress bars or metrics registries.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acker;
pub mod clock;
pub mod durable;
mod executor;
pub mod fairness;
pub mod fate;
pub mod policy;
pub mod scheduler;
pub mod stats;
pub mod store;
pub mod time_source;
pub mod topology;

pub use executor::{RunningTopology, ShutdownReport};
