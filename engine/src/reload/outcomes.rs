//! What a [`Reloader`](super::Reloader) is told and what it answers: its options, the
//! `If-Match` precondition, what a reload did ([`Reloaded`], [`Pushed`]) and why one did not
//! happen ([`PushError`], [`RollbackError`], [`ReloadError`]).

use super::history::HistoryEntry;
use super::record::SetRecord;
#[cfg(doc)]
use super::reloader::Reloader;
use crate::diag::{Diagnostic, Rejected};
use crate::set::CompiledSet;
use crate::types::Version;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// A callback told of every recorded reload attempt (to count them, for instance).
pub type ReloadListener = Arc<dyn Fn(&HistoryEntry) + Send + Sync>;

/// How much a [`Reloader`] remembers, and who it tells.
#[derive(Clone)]
pub struct ReloadOptions {
    /// Reload attempts kept in the history (default 100).
    pub history_limit: usize,
    /// Previous accepted sets kept for rollback (default 10).
    pub keep_previous: usize,
    /// Accepted versions whose files the history keeps, for diffs and for a rollback to a
    /// chosen version (default [`FILES_KEPT`](super::FILES_KEPT), 50).
    pub files_kept: usize,
    /// Told of every recorded attempt (see [`on_reload`](Self::on_reload)).
    pub on_reload: Option<ReloadListener>,
    /// The set of record several processes share, if any (see [`SetRecord`]).
    pub record: Option<Arc<dyn SetRecord>>,
    /// What the set must also satisfy to be accepted (see [`check`](Self::check)).
    pub check: Option<SetCheck>,
}

/// A check of a compiled set beyond the rule format's: its errors reject the set (for example
/// a label whose `alert` names a receiver the process's configuration does not define).
pub type SetCheck = Arc<dyn Fn(&CompiledSet) -> Vec<Diagnostic> + Send + Sync>;

impl Default for ReloadOptions {
    fn default() -> Self {
        ReloadOptions {
            history_limit: 100,
            keep_previous: 10,
            files_kept: super::history::FILES_KEPT,
            on_reload: None,
            record: None,
            check: None,
        }
    }
}

impl ReloadOptions {
    /// Calls `listener` after each recorded attempt, the start-up load included.
    pub fn on_reload(mut self, listener: impl Fn(&HistoryEntry) + Send + Sync + 'static) -> Self {
        self.on_reload = Some(Arc::new(listener));
        self
    }

    /// Rejects every set (the start-up set aside: the caller checks that one) for which
    /// `check` gives an error.
    pub fn check(
        mut self,
        check: impl Fn(&CompiledSet) -> Vec<Diagnostic> + Send + Sync + 'static,
    ) -> Self {
        self.check = Some(Arc::new(check));
        self
    }

    /// Publishes every set this process accepts to `record` before swapping it in.
    pub fn record(mut self, record: Arc<dyn SetRecord>) -> Self {
        self.record = Some(record);
        self
    }
}

impl fmt::Debug for ReloadOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadOptions")
            .field("history_limit", &self.history_limit)
            .field("keep_previous", &self.keep_previous)
            .field("files_kept", &self.files_kept)
            .field("on_reload", &self.on_reload.is_some())
            .field("record", &self.record.is_some())
            .finish()
    }
}

/// An `If-Match` precondition: the version a writer believes is current.
///
/// ```
/// use rebound_engine::reload::IfMatch;
/// use rebound_engine::Version;
///
/// let v: Version = "0123456789abcdef".parse().unwrap();
/// assert!(IfMatch::parse("0123456789abcdef").matches(&v));
/// assert!(IfMatch::parse("\"0123456789abcdef\"").matches(&v));
/// assert!(IfMatch::parse("*").matches(&v));
/// assert!(!IfMatch::parse("\"ffff\", W/\"eeee\"").matches(&v));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: any current version.
    Any,
    /// One of these versions.
    OneOf(Vec<String>),
}

impl IfMatch {
    /// Reads a header value: a version, quoted or not, or a comma-separated list of them,
    /// or `*`. A weak `W/` prefix is ignored.
    pub fn parse(header: &str) -> IfMatch {
        let mut versions = Vec::new();
        for item in header.split(',') {
            let item = item.trim();
            if item == "*" {
                return IfMatch::Any;
            }
            let item = item.strip_prefix("W/").unwrap_or(item);
            let item = item.trim_matches('"').trim();
            if !item.is_empty() {
                versions.push(item.to_string());
            }
        }
        IfMatch::OneOf(versions)
    }

    /// Whether `current` satisfies the precondition.
    pub fn matches(&self, current: &Version) -> bool {
        match self {
            IfMatch::Any => true,
            IfMatch::OneOf(versions) => versions.iter().any(|v| v == current.as_str()),
        }
    }
}

/// Why a push (or a pull) was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// A file name is not a plain `*.yaml`/`*.yml` name, or is one the rules directory
    /// cannot hold (too long, refused by its file system, taken by a directory).
    #[error("invalid file name: {0}")]
    BadName(String),
    /// The push holds no file at all.
    #[error("a rule set needs at least one file")]
    Empty,
    /// `If-Match` named a version that is not the current one.
    #[error("the current version is {current}, not the one given in If-Match")]
    Conflict {
        /// The version in force.
        current: Version,
    },
    /// The set does not load; the diagnostics say why.
    #[error("the rule set was rejected\n{0}")]
    Rejected(Rejected),
    /// The set is valid but could not be written into the rules directory.
    #[error("cannot write the rule set into {dir}: {source}")]
    Write {
        /// The rules directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The set is valid, but the shared set of record could not take it.
    #[error("{0}")]
    Unpublished(String),
}

/// Why a rollback did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RollbackError {
    /// No previous accepted set is kept.
    #[error("there is no previous accepted version to roll back to")]
    NoPrevious,
    /// A rollback to a version whose files are not kept (never accepted here, or accepted
    /// before the last [`FILES_KEPT`](super::FILES_KEPT)).
    #[error("version {0} is not one of the accepted versions kept for rollback")]
    NotKept(Version),
    /// The kept files of the version did not compile (the set check, such as the alert
    /// receivers, refused them).
    #[error("the rule set of that version is rejected now\n{0}")]
    Rejected(Rejected),
    /// The previous set could not be written into the rules directory.
    #[error("cannot write the rule set into {dir}: {source}")]
    Write {
        /// The rules directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The shared set of record could not take the previous set.
    #[error("{0}")]
    Unpublished(String),
}

/// Why a set could not be loaded from the rules directory: at start-up
/// ([`Reloader::open`]) or on a reload ([`Reloader::reload_dir`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The directory could not be read.
    #[error("cannot read the rule set {dir}: {source}")]
    Read {
        /// The rules directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The files there do not load; on a reload, the set in force stays.
    #[error("the rule set was rejected\n{0}")]
    Rejected(Rejected),
}

impl ReloadError {
    /// Whether the directory could not be read for want of a resource that comes back (file
    /// descriptors, memory) or by an interruption: the same read may well succeed later.
    pub fn is_passing(&self) -> bool {
        let ReloadError::Read { source, .. } = self else {
            return false;
        };
        // EMFILE and ENFILE (too many open files, in the process or the system) have no
        // ErrorKind of their own; their numbers are the same on Linux and macOS.
        matches!(source.raw_os_error(), Some(23 | 24))
            || matches!(
                source.kind(),
                io::ErrorKind::OutOfMemory | io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
            )
    }
}

/// What a reload from the directory did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// The files are those of the set in force (or of the last rejected attempt): nothing
    /// to do.
    Unchanged(Version),
    /// A new set is in force.
    Accepted(Version),
}

/// An accepted push, or one that would be accepted (a dry run).
#[derive(Debug, Clone, PartialEq)]
pub struct Pushed {
    /// The pushed set's version.
    pub version: Version,
    /// False when the set was already in force (nothing changed).
    pub changed: bool,
    /// Warnings found while compiling (the set loads anyway).
    pub warnings: Vec<Diagnostic>,
}
