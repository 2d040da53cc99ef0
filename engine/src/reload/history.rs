//! The record of every reload attempt: what was tried, where it came from, and how it ended;
//! and the files of the last [`FILES_KEPT`] accepted versions, so that a console can show a
//! diff between two of them and a rollback can go back to any of them
//! (`docs/spec/console.md`, "Rule history for diffs").

use crate::diag::Diagnostic;
use crate::handle::Source;
use crate::load::SourceFile;
use crate::release::Arms;
use crate::types::Version;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// How many accepted versions keep their files: the last 50, counting each version once at
/// its latest acceptance (the spec's number, for a single process and for a fleet's store).
pub const FILES_KEPT: usize = 50;

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

/// Who asked for a push or a rollback, and why: the admin API's `operator` and `reason`,
/// kept in the history as the dead-letter actions keep theirs in the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// Who acted.
    pub operator: String,
    /// Why.
    pub reason: String,
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
    /// Who pushed or rolled back, and why, when they said so (never for a file or a pull).
    /// For a canary promoted or rolled back by its controller, operator `canary` and the
    /// judgement's reason.
    pub by: Option<Actor>,
    /// A canary's two arms when it was promoted or rolled back ([`Source::Canary`],
    /// [`Source::RolledBack`]): the figures the decision was taken on.
    pub arms: Option<Arms>,
}

/// A bounded log of reload attempts, newest first. The oldest entries fall off the end.
///
/// Beside it, the files of the most recently accepted versions, newest first and each
/// version once: accepting a version again (a rollback to it) moves it to the front, and
/// the version accepted longest ago falls off past the limit. The two bounds are apart on
/// purpose: a burst of rejected saves pushes accepted entries out of the log, never the
/// files a rollback needs.
#[derive(Debug, Clone)]
pub(crate) struct History {
    entries: VecDeque<HistoryEntry>,
    limit: usize,
    files: VecDeque<(Version, Arc<[SourceFile]>)>,
    files_limit: usize,
}

impl History {
    /// An empty history that keeps at most `limit` entries (at least one) and the files of
    /// at most `files_limit` accepted versions (at least one: the set in force).
    pub(crate) fn new(limit: usize, files_limit: usize) -> Self {
        History {
            entries: VecDeque::new(),
            limit: limit.max(1),
            files: VecDeque::new(),
            files_limit: files_limit.max(1),
        }
    }

    /// Records `entry` as the newest; an accepted one keeps `files`, its set's.
    pub(crate) fn record(&mut self, entry: HistoryEntry, files: Option<&[SourceFile]>) {
        if let (Outcome::Accepted, Some(files)) = (entry.outcome, files) {
            let version = entry.version;
            let kept = match self.files.iter().position(|(v, _)| *v == version) {
                Some(i) => self.files.remove(i).map(|(_, f)| f),
                None => None,
            };
            let files = kept.unwrap_or_else(|| files.into());
            self.files.push_front((version, files));
            self.files.truncate(self.files_limit);
        }
        self.entries.push_front(entry);
        self.entries.truncate(self.limit);
    }

    /// Changes the newest entry (one just recorded), if there is one.
    pub(crate) fn amend_newest(&mut self, change: impl FnOnce(&mut HistoryEntry)) {
        if let Some(e) = self.entries.front_mut() {
            change(e);
        }
    }

    /// The entries, newest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &HistoryEntry> {
        self.entries.iter()
    }

    /// The files of `version`, if it is one of the accepted versions kept.
    pub(crate) fn files(&self, version: &Version) -> Option<Arc<[SourceFile]>> {
        self.files
            .iter()
            .find(|(v, _)| v == version)
            .map(|(_, f)| Arc::clone(f))
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
            by: None,
            arms: None,
        }
    }

    fn files(name: &str) -> Vec<SourceFile> {
        vec![SourceFile::new(name, name, name)]
    }

    #[test]
    fn keeps_the_newest_entries_first_up_to_the_limit() {
        let mut h = History::new(2, 2);
        for v in [0xa, 0xb, 0xc] {
            h.record(entry(v), None);
        }
        let versions: Vec<_> = h.entries().map(|e| e.version.to_string()).collect();
        assert_eq!(versions, ["000000000000000c", "000000000000000b"]);
    }

    #[test]
    fn files_are_kept_for_the_last_accepted_versions_each_once() {
        let mut h = History::new(100, 2);
        h.record(entry(0xa), Some(&files("a")));
        h.record(entry(0xb), Some(&files("b")));
        // Accepted again (a rollback to it): it is the newest now, and kept once.
        h.record(entry(0xa), Some(&files("a")));
        h.record(entry(0xc), Some(&files("c")));
        let name = |h: &History, v| h.files(&Version::from_hash(v)).map(|f| f[0].name.clone());
        assert_eq!(name(&h, 0xc).as_deref(), Some("c"));
        assert_eq!(name(&h, 0xa).as_deref(), Some("a"));
        assert_eq!(
            name(&h, 0xb),
            None,
            "accepted longest ago, past the limit of 2"
        );
        // A rejected attempt keeps no files, and the log keeps every entry.
        let rejected = HistoryEntry {
            outcome: Outcome::Rejected,
            ..entry(0xd)
        };
        h.record(rejected, Some(&files("d")));
        assert_eq!(name(&h, 0xd), None);
        assert_eq!(name(&h, 0xa).as_deref(), Some("a"));
        assert_eq!(h.entries().count(), 5);
    }
}
