//! [`SetRecord`]: the set of record, when several processes share one (a fleet's store).
//!
//! A [`Reloader`](super::Reloader) given a record publishes every set it accepts from this
//! process (a push, a file edit, a rollback) to the record before it swaps it in, with a
//! compare-and-set on the version: a push whose `If-Match` was satisfied here, by a process
//! that had not yet caught up with the record, is refused as a conflict, as it would be on the
//! process that holds the newest set. A set adopted *from* the record
//! ([`Reloader::adopt`](super::Reloader::adopt)) is not published back.

use crate::handle::Source;
use crate::load::SourceFile;
use crate::types::Version;

/// A set about to be swapped in, as the record is asked to take it.
#[derive(Debug)]
pub struct Publication<'a> {
    /// The set's version.
    pub version: Version,
    /// Its files.
    pub files: &'a [SourceFile],
    /// Where it came from.
    pub source: Source,
    /// Take it only if the record's version is this one (`None`: unconditionally).
    pub expected: Option<Version>,
}

/// Why the record did not take a set.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The record holds another version than the one expected.
    #[error("the shared rule set is at version {current}, not the one expected")]
    Conflict {
        /// The record's version.
        current: Version,
    },
    /// The record could not be reached or written.
    #[error("the shared rule set could not be written: {0}")]
    Unavailable(String),
}

/// Where the set of record is kept. Called under the reloader's lock: one publication at a
/// time per process.
pub trait SetRecord: Send + Sync {
    /// Makes `set` the set of record (compare-and-set on `set.expected`).
    fn publish(&self, set: &Publication<'_>) -> Result<(), PublishError>;
}
