//! rebound-runtime: the Storm-style stream runtime (topology, acker, scheduler, store, admin API).
//!
//! - [`admin`]: the admin HTTP API (axum): rules, decide, health, metrics.
//! - [`metrics`]: the Prometheus registry and the spec's metric names.
#![forbid(unsafe_code)]

pub mod admin;
pub mod metrics;
