//! rebound-runtime: the Storm-style stream runtime.
//!
//! At-least-once is the promise: every message a spout hands out ends either acked or
//! dead-lettered (stored, then reported), never lost and never both.
//!
//! # Module map
//!
//! - [`topology`]: the API a user writes: `Spout`, `Bolt`, `DeferredBolt`, tuples, groupings,
//!   the builder and the config; `Message`, with its retry metadata.
//! - `acker` (private): Storm's XOR ledger with rotating timeout buckets, and the acker task.
//! - [`fate`]: the failure seam: `FailurePolicy` (in the engine's terms: its `FailureContext`
//!   in, its `Decided` out), `RetryQueue`, `DeadLetterSink`, `AckedFates`, the one
//!   `DeadLetter`, and in-memory implementations.
//! - `fairness` (private): mixing due retries with new messages.
//! - [`adaptive`]: the state the runtime keeps between failures for the rules' signals: the
//!   fault [`Heat`](adaptive::Heat) of each biz.
//! - [`stats`]: counters and fixed-bucket histograms (complete latency, retry delay, bolt time
//!   per tuple by component), for whoever exports metrics.
//! - `executor` (private): the spout, bolt and acker tasks, start/shutdown
//!   ([`RunningTopology`]), telling a stall at `max_spout_pending` from backpressure, and
//!   [`caught_panic`] for a process's panic hook.
//! - [`time`]: one time model: monotonic instants to wait on, wall [`Timestamp`](time::Timestamp)s
//!   to persist, the [`TimeSource`](time::TimeSource) trait (tokio and manual), and
//!   [`TimeScale`](time::TimeScale). The only place that reads a clock.
//! - [`scheduler`]: `RetryScheduler`, the delay queue of message ids by due time (cancel,
//!   reschedule, drain in due order); it takes `now` as an argument.
//! - [`store`]: the `Store` trait (`apply` of `WriteOp`s, and the reads production needs) and
//!   its embedded SQLite implementation.
//! - [`policy`]: the rule engine as the failure policy (`RulePolicy` over the live
//!   `PolicyHandle`), where `--time-scale` converts.
//! - [`durable`]: the failure seam backed by the store: the journal (the one writer, and the
//!   one owner of what the store holds), durable retry queues (recovered after a restart), the
//!   dead-letter sink, acked fates and source positions, and the dead-letter labels that act
//!   ([`durable::labels`]: redrive, expire, alert, SLAs).
//!
//! The product built on it (the bundled order pipeline, the admin API, the metrics exposition,
//! the progress view) lives in the `rebound` package's library, not here: the runtime knows
//! nothing of HTTP, progress bars or metrics registries.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod acker;
pub mod adaptive;
mod delays;
pub mod durable;
mod executor;
mod fairness;
pub mod fate;
pub mod policy;
pub mod release;
pub mod scheduler;
pub mod sources;
pub mod stats;
pub mod store;
pub mod time;
pub mod topology;

pub use executor::{RunningTopology, ShutdownReport, caught_panic};
