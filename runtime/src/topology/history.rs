//! Every failure of a message's life, in order: [`Failures`] (the first 16 and the last 16 of
//! them beyond 32, and how many were dropped between), each a [`FailureRecord`].
//!
//! A message carries its history from delivery to delivery (in its
//! [`RetryMeta`](super::RetryMeta)), the store keeps it with the retry row and the dead
//! letter, and the operator's routes show it: the first cause of a failure is never lost.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rebound_engine::{RuleRef, Version};

use crate::time::Timestamp;

/// How many failures are kept from the start of a message's life, and how many from its end.
pub const KEPT_AT_EACH_END: usize = 16;

/// One failure of a message and what was decided for it.
#[derive(Clone, Debug, PartialEq)]
pub struct FailureRecord {
    /// The delivery that failed (1-based).
    pub attempt: u32,
    /// When it was handled (wall clock).
    pub at: Timestamp,
    /// The failure's code.
    pub code: String,
    /// The failure's message.
    pub message: String,
    /// The failure's attrs.
    pub attrs: BTreeMap<String, String>,
    /// The rule that decided.
    pub rule: RuleRef,
    /// The rule-set version that decided.
    pub version: Version,
    /// The delay chosen after this failure; `None` for a failure that was not retried (the
    /// last of a dead-lettered message).
    pub delay: Option<Duration>,
}

/// A message's failures, oldest first: all of them up to 32, then the first 16 and the last 16
/// with the count of those dropped in between. Cheap to clone (shared until the next push),
/// and empty costs nothing: most messages never fail.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Failures(Option<Arc<Kept>>);

#[derive(Clone, Debug, Default, PartialEq)]
struct Kept {
    /// The first [`KEPT_AT_EACH_END`], then up to that many latest (a window that slides).
    records: Vec<FailureRecord>,
    dropped: u64,
}

impl Failures {
    /// A history of `records` (oldest first) with `dropped` left out between its first and
    /// its last [`KEPT_AT_EACH_END`], as the store reads it back.
    pub fn from_parts(records: Vec<FailureRecord>, dropped: u64) -> Failures {
        if records.is_empty() && dropped == 0 {
            return Failures(None);
        }
        let mut failures = Failures(Some(Arc::new(Kept {
            records: Vec::new(),
            dropped,
        })));
        for r in records {
            failures.push(r);
        }
        failures
    }

    /// Adds the latest failure; beyond `2 × KEPT_AT_EACH_END`, the oldest of the latest ones
    /// is dropped (the first ones stay).
    pub fn push(&mut self, record: FailureRecord) {
        let kept = Arc::make_mut(self.0.get_or_insert_with(Arc::default));
        if kept.records.len() == 2 * KEPT_AT_EACH_END {
            kept.records.remove(KEPT_AT_EACH_END);
            kept.dropped += 1;
        }
        kept.records.push(record);
    }

    /// Takes the latest failure out (a killed retry's, which becomes its letter's failure).
    pub fn take_last(&mut self) -> Option<FailureRecord> {
        let kept = Arc::make_mut(self.0.as_mut()?);
        let last = kept.records.pop();
        if kept.records.is_empty() && kept.dropped == 0 {
            self.0 = None;
        }
        last
    }

    /// The kept failures, oldest first.
    pub fn records(&self) -> &[FailureRecord] {
        self.0.as_ref().map_or(&[], |k| &k.records)
    }

    /// The latest failure.
    pub fn last(&self) -> Option<&FailureRecord> {
        self.records().last()
    }

    /// The latest failure, to change it in place (copied first if shared).
    pub fn last_mut(&mut self) -> Option<&mut FailureRecord> {
        Arc::make_mut(self.0.as_mut()?).records.last_mut()
    }

    /// How many failures were dropped between the first and the last ones kept.
    pub fn dropped(&self) -> u64 {
        self.0.as_ref().map_or(0, |k| k.dropped)
    }

    /// True if the message never failed.
    pub fn is_empty(&self) -> bool {
        self.records().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(attempt: u32) -> FailureRecord {
        FailureRecord {
            attempt,
            at: Timestamp::from_millis(u64::from(attempt)),
            code: format!("C{attempt}"),
            message: String::new(),
            attrs: BTreeMap::new(),
            rule: RuleRef::Defaults,
            version: Version::from_hash(1),
            delay: Some(Duration::from_millis(10)),
        }
    }

    #[test]
    fn keeps_the_first_and_the_last_sixteen_beyond_thirty_two() {
        let mut f = Failures::default();
        assert!(f.is_empty());
        for a in 1..=32 {
            f.push(record(a));
        }
        assert_eq!(f.records().len(), 32);
        assert_eq!(f.dropped(), 0);
        for a in 33..=40 {
            f.push(record(a));
        }
        let attempts: Vec<u32> = f.records().iter().map(|r| r.attempt).collect();
        let expected: Vec<u32> = (1..=16).chain(25..=40).collect();
        assert_eq!(attempts, expected);
        assert_eq!(f.dropped(), 8);
        assert_eq!(f.last().map(|r| r.attempt), Some(40));
    }

    #[test]
    fn a_clone_is_not_changed_by_a_later_push() {
        let mut f = Failures::default();
        f.push(record(1));
        let before = f.clone();
        f.push(record(2));
        assert_eq!(before.records().len(), 1);
        assert_eq!(f.records().len(), 2);
    }

    #[test]
    fn from_parts_round_trips() {
        let mut f = Failures::default();
        for a in 1..=40 {
            f.push(record(a));
        }
        let back = Failures::from_parts(f.records().to_vec(), f.dropped());
        assert_eq!(back, f);
        assert_eq!(Failures::from_parts(Vec::new(), 0), Failures::default());
    }
}
