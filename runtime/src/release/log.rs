//! The decision log's runtime side: each decision, sampled, as a [`LoggedDecision`] in a
//! bounded buffer that the journal drains into the store (`Durable::log_decisions`, one
//! `WriteOp::LogDecisions` per round, behind the decisions: a decision never waits for it).
//!
//! The sample is taken by the decision's jitter seed (a stable hash of the message and the
//! attempt), so it costs no random draw and a replay samples the same decisions. The buffer
//! holds at most [`BUFFER_AT_MOST`] entries: past it (a store that stopped taking writes) new
//! entries are dropped and counted, never queued without bound. The log is a sample for
//! analysis, not a record.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rebound_engine::release::{Arm, LoggedContext, LoggedDecision, Outcome};
use rebound_engine::{Decided, FailureContext};

use crate::topology::Message;

/// The most entries waiting for the store.
pub const BUFFER_AT_MOST: usize = 20_000;

/// `decisions:` of the configuration file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogOptions {
    /// The share of decisions recorded, 0–1 (`decisions.sample`, default 100%).
    pub sample: f64,
    /// The newest entries the store keeps (`decisions.keep`, default 100,000).
    pub keep: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            sample: 1.0,
            keep: 100_000,
        }
    }
}

impl LogOptions {
    /// No decision recorded.
    pub const OFF: LogOptions = LogOptions {
        sample: 0.0,
        keep: 0,
    };
}

/// The decisions waiting for the store.
#[derive(Debug)]
pub struct DecisionLog {
    options: LogOptions,
    /// A seed falls in the sample when `seed % 1_000_000 < cut`.
    cut: u64,
    buffer: Mutex<Vec<LoggedDecision>>,
    recorded: AtomicU64,
    dropped: AtomicU64,
}

impl DecisionLog {
    pub(crate) fn new(options: LogOptions) -> DecisionLog {
        let sample = if options.sample.is_finite() {
            options.sample.clamp(0.0, 1.0)
        } else {
            0.0
        };
        DecisionLog {
            options,
            cut: if options.keep == 0 {
                0
            } else {
                (sample * 1_000_000.0).round() as u64
            },
            buffer: Mutex::new(Vec::new()),
            recorded: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> LogOptions {
        self.options
    }

    /// Whether a decision whose jitter seed is `seed` is recorded.
    pub fn samples(&self, seed: u64) -> bool {
        seed % 1_000_000 < self.cut
    }

    /// Records one decision (when sampled): `ctx` as the set saw it (the rules' time),
    /// `decided` what the rules decided, `arm` the canary arm that decided, while a canary
    /// runs.
    pub(crate) fn record(
        &self,
        message: &Message,
        ctx: &FailureContext<'_>,
        seed: u64,
        decided: &Decided,
        arm: Option<Arm>,
    ) {
        if !self.samples(seed) {
            return;
        }
        let entry = LoggedDecision {
            id: message.id.as_str().to_owned(),
            context: LoggedContext::of(ctx, seed),
            outcome: Outcome::of(decided),
            arm,
        };
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        if buffer.len() >= BUFFER_AT_MOST {
            drop(buffer);
            self.dropped.fetch_add(1, Relaxed);
            return;
        }
        buffer.push(entry);
        self.recorded.fetch_add(1, Relaxed);
    }

    /// Takes what waits for the store.
    pub fn take(&self) -> Vec<LoggedDecision> {
        std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Entries recorded so far (handed to the store or waiting).
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Relaxed)
    }

    /// Entries dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }
}
