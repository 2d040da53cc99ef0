//! The record of every reload attempt: what was tried, where it came from, and how it ended.

use crate::diag::Diagnostic;
use crate::handle::Source;
use crate::types::Version;
use std::collections::VecDeque;
use std::fmt;
use std::time::SystemTime;

/// How a reload attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The set was swapped in.
    Accepted,
    /// The set was refused; the previous one stayed in force.
    Rejected,
}

impl Outcome {
    /// `accepted` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Rejected => "rejected",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reload attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The version of the candidate set (for a rejected one, the hash of what was tried).
    pub version: Version,
    /// Accepted or rejected.
    pub outcome: Outcome,
    /// Where the candidate came from.
    pub source: Source,
    /// When the attempt ended.
    pub at: SystemTime,
    /// Why it was rejected (errors only); empty for an accepted set.
    pub errors: Vec<Diagnostic>,
}

/// A bounded log of reload attempts, newest first. The oldest entries fall off the end.
#[derive(Debug, Clone)]
pub(crate) struct History {
    entries: VecDeque<HistoryEntry>,
    limit: usize,
}

impl History {
    /// An empty history that keeps at most `limit` entries (at least one).
    pub(crate) fn new(limit: usize) -> Self {
        History {
            entries: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// Records `entry` as the newest.
    pub(crate) fn record(&mut self, entry: HistoryEntry) {
        self.entries.push_front(entry);
        self.entries.truncate(self.limit);
    }

    /// The entries, newest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &HistoryEntry> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: u64) -> HistoryEntry {
        HistoryEntry {
            version: Version::from_hash(v),
            outcome: Outcome::Accepted,
            source: Source::Push,
            at: SystemTime::UNIX_EPOCH,
            errors: Vec::new(),
        }
    }

    #[test]
    fn keeps_the_newest_entries_first_up_to_the_limit() {
        let mut h = History::new(2);
        for v in [0xa, 0xb, 0xc] {
            h.record(entry(v));
        }
        let versions: Vec<_> = h.entries().map(|e| e.version.to_string()).collect();
        assert_eq!(versions, ["000000000000000c", "000000000000000b"]);
    }
}
