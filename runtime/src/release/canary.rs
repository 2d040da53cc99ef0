//! A running canary: its set, its slice, and each arm's outcomes since it started.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::SystemTime;

use rebound_engine::release::{Arm, Slice};
use rebound_engine::{CompiledSet, Version};

use super::Observed;
use crate::stats::ACKED_ATTEMPTS;
use crate::topology::Message;

/// One arm's outcomes over the canary's life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArmFigures {
    /// Messages of the arm delivered for the first time.
    pub first_deliveries: u64,
    /// Retries of the arm's messages fired.
    pub retries: u64,
    /// The arm's messages dead-lettered.
    pub dead_letters: u64,
    /// Trees completed by the attempt that succeeded (`[0]`: at the first delivery; the last
    /// holds that attempt and every later one).
    pub acked_by_attempt: Vec<u64>,
}

impl ArmFigures {
    /// Retries fired per first delivery (0 before the first).
    pub fn retry_ratio(&self) -> f64 {
        ratio(self.retries, self.first_deliveries)
    }

    /// Dead letters per first delivery (0 before the first).
    pub fn dead_letter_ratio(&self) -> f64 {
        ratio(self.dead_letters, self.first_deliveries)
    }
}

fn ratio(n: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

/// A canary's state at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryFigures {
    /// The candidate's version.
    pub version: Version,
    /// When it started.
    pub since: SystemTime,
    /// Who it takes.
    pub slice: Slice,
    /// The messages the current set decides.
    pub stable: ArmFigures,
    /// The messages the candidate decides.
    pub canary: ArmFigures,
}

#[derive(Debug, Default)]
struct ArmCounters {
    first_deliveries: AtomicU64,
    retries: AtomicU64,
    dead_letters: AtomicU64,
    acked_by_attempt: [AtomicU64; ACKED_ATTEMPTS],
}

impl ArmCounters {
    fn figures(&self) -> ArmFigures {
        ArmFigures {
            first_deliveries: self.first_deliveries.load(Relaxed),
            retries: self.retries.load(Relaxed),
            dead_letters: self.dead_letters.load(Relaxed),
            acked_by_attempt: self
                .acked_by_attempt
                .iter()
                .map(|a| a.load(Relaxed))
                .collect(),
        }
    }
}

/// A canary in force.
#[derive(Debug)]
pub(crate) struct CanaryRun {
    set: Arc<CompiledSet>,
    slice: Slice,
    since: SystemTime,
    stable: ArmCounters,
    canary: ArmCounters,
}

impl CanaryRun {
    pub(crate) fn new(set: Arc<CompiledSet>, slice: Slice) -> CanaryRun {
        CanaryRun {
            set,
            slice,
            since: SystemTime::now(),
            stable: ArmCounters::default(),
            canary: ArmCounters::default(),
        }
    }

    pub(crate) fn set(&self) -> &Arc<CompiledSet> {
        &self.set
    }

    /// The arm of `message`: by its biz and its ordering key, its id when it has none.
    pub(crate) fn arm(&self, message: &Message) -> Arm {
        let key = message
            .key
            .as_ref()
            .map_or(message.id.as_str(), |k| k.as_str());
        self.slice.arm(&message.biz, key)
    }

    pub(crate) fn observe(&self, message: &Message, event: Observed) {
        let arm = match self.arm(message) {
            Arm::Stable => &self.stable,
            Arm::Canary => &self.canary,
        };
        match event {
            Observed::Delivered if message.retry.attempt <= 1 => &arm.first_deliveries,
            Observed::Delivered => &arm.retries,
            Observed::DeadLettered => &arm.dead_letters,
            Observed::Acked => {
                let at = (message.retry.attempt.max(1) as usize).min(ACKED_ATTEMPTS);
                &arm.acked_by_attempt[at - 1]
            }
        }
        .fetch_add(1, Relaxed);
    }

    pub(crate) fn figures(&self) -> CanaryFigures {
        CanaryFigures {
            version: *self.set.version(),
            since: self.since,
            slice: self.slice.clone(),
            stable: self.stable.figures(),
            canary: self.canary.figures(),
        }
    }
}
