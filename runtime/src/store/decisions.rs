//! The decision log as the store keeps it: each [`LoggedDecision`] as one JSON text (the
//! engine's serde form, the same in every store), appended in order by
//! [`WriteOp::LogDecisions`](super::WriteOp::LogDecisions) and trimmed to the newest `keep`
//! entries in the same transaction; read back through a [`DecisionFilter`], oldest first.
//!
//! It is a sample for analysis (what-if decides every logged context again), not a record:
//! a batch applied twice may log its entries twice, and trimming forgets the oldest. An entry
//! that no longer parses (written by a build whose engine shaped it otherwise) is skipped on
//! read with a warning; the rest of the log is still read.

use rebound_engine::release::LoggedDecision;

use super::Result;
use super::values::corrupt;
use crate::time::Timestamp;

/// Which logged decisions [`Store::decisions`](super::Store::decisions) returns: those whose
/// context's `now_ms` is at or after `since`, the newest `limit` of them (all when `None`),
/// oldest first. "Newest" is the log's order (the order the entries were appended), which on
/// a fleet need not be the order of their `now_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecisionFilter {
    /// Only decisions made at or after this (on the context's `now_ms`).
    pub since: Option<Timestamp>,
    /// At most this many, the newest (all when `None`).
    pub limit: Option<usize>,
}

impl DecisionFilter {
    /// True if a decision made at `now_ms` passes `since` (the limit aside).
    pub fn admits(&self, now_ms: u64) -> bool {
        self.since.is_none_or(|since| now_ms >= since.as_millis())
    }

    /// True if `d` passes `since` (the limit aside).
    pub fn matches(&self, d: &LoggedDecision) -> bool {
        self.admits(d.context.now_ms)
    }
}

/// The stored text of `d`: its JSON.
pub fn decision_to_json(d: &LoggedDecision) -> Result<String> {
    serde_json::to_string(d).map_err(|e| corrupt("decisions", "entry", e))
}

/// The entry stored as `text` in `location` (numbered `at` there, for the warning), or `None`
/// with a warning if it does not parse: one bad entry never fails a read of the log.
pub fn decision_from_json(location: &str, at: &str, text: &[u8]) -> Option<LoggedDecision> {
    match serde_json::from_slice(text) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(store = location, entry = at, error = %e,
                "skipping a decision log entry that does not parse");
            None
        }
    }
}
