//! rebound-runtime: the Storm-style stream runtime.
//!
//! A map of the crate:
//!
//! - [`topology`] — the API a user writes: `Spout`, `Bolt`, `DeferredBolt`, tuples, groupings,
//!   the builder and the config.
//! - [`acker`] — Storm's XOR ledger with rotating timeout buckets, and the acker task.
//! - [`fate`] — the failure seam: `FailurePolicy` (retry or dead letter), `RetryQueue`,
//!   `DeadLetterSink`, and in-memory implementations of each.
//! - [`fairness`] — mixing due retries with new messages, and the retry fuse.
//! - [`stats`] — counters and a latency histogram for the metrics exporter.
//! - [`time_source`] — monotonic and wall-clock time (tokio's clock by default).
//! - `executor` (private) — the spout, bolt and acker tasks, and start/shutdown
//!   ([`RunningTopology`]).
//!
//! At-least-once is the promise: every message a spout hands out ends either acked or
//! dead-lettered (stored, then reported), never lost and never both.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acker;
mod executor;
pub mod fairness;
pub mod fate;
pub mod stats;
pub mod time_source;
pub mod topology;

pub use executor::{RunningTopology, ShutdownReport};
