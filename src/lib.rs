//! `rebound`: the product built on the framework. The command line (`src/main.rs`, `src/cmd/`)
//! parses flags and calls this library; the rule engine (`rebound-engine`) and the stream
//! runtime (`rebound-runtime`) know nothing of it.
//!
//! # Module map
//!
//! - [`pipeline`]: the bundled order pipeline behind `rebound run` and `rebound serve` (order
//!   spout, parse bolt, idempotent store bolt with injected faults), its `pipeline.db`, its
//!   report from the durable state, the progress view and the data directory's lock.
//! - [`admin`]: the admin HTTP API (axum): rules and their history, decide, retry paths and
//!   their charts, dead letters, health, metrics.
//! - [`metrics`]: the Prometheus registry and the spec's metric names.
//! - [`config`]: the configuration file of `run` and `serve` (`--config FILE`), read with the
//!   engine's YAML diagnostics.
//! - [`json`]: the JSON shapes of the runtime's records (a dead letter, its failures, a
//!   retry, an audit line), one shape for the admin API, the alerts and their backlog.
//! - [`alerts`]: the webhook sender of `alert:` labels ([`alerts::AlertDispatcher`]): batched,
//!   retried with backoff, never blocking its caller.
//! - [`relay`]: `rebound relay`, a team's HTTP handler behind the rules: the handler's
//!   client and its answers read as fates.
//! - [`outbound`]: the one HTTP(S) client out (reqwest over rustls with ring; the system's
//!   roots or a CA file), for the relay's handler and the alert webhooks.
//! - [`release`]: the product's side of a shadow set and a canary (their desks, the
//!   canary's controller, their JSON).
//! - [`app`]: the one application wiring that `run` and `serve` share (signals, logging, the
//!   rules watcher and puller, the admin listener, the graceful stop), told apart only by
//!   their [`app::Options`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod alerts;
pub mod app;
pub mod config;
pub mod console;
pub mod falls_under;
pub mod json;
#[cfg(test)]
mod layers;
pub mod metrics;
pub mod outbound;
pub mod pipeline;
pub mod relay;
pub mod release;

/// How a command ended: the exit codes of cli.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 0: success.
    Ok,
    /// 1: the thing checked is wrong (invalid rules, failing tests, lost messages).
    Wrong,
    /// 2: usage or I/O error; the message has been printed.
    Trouble,
}
