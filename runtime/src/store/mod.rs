//! Durable state: scheduled retries, dead letters, the audit log, message fates and source
//! positions, behind one [`Store`] trait.
//!
//! - [`sqlite`]: the embedded default, one SQLite file (`rebound.db`) in the data directory.
//! - [`schema`]: the schema, its version, and the migrations run on open.
//! - [`writer`]: [`BatchWriter`], a thread that groups single writes from the runtime into
//!   transactions (group commit) and tells each writer when its record is durable.
//!
//! # The life of a record
//!
//! - A failed message the rules retry is written as a [`ScheduledRetry`] (upsert by message
//!   id) and put in the [`RetryScheduler`]. The row stays
//!   while the retry is pending *and while the redelivery is in flight*; it goes away in the
//!   same transaction that records the message's fate (acked or dead-lettered). So a crash at
//!   any point leaves the retry scheduled, and [`recover`] fires it again.
//! - A message's fate is kept per id ([`Fate`]), written with the ack or the dead letter, first
//!   fate wins: a second, different fate for the same id is refused and reported as
//!   [`Applied::FateAlreadyKnown`]. Before processing a redelivered message, the runtime asks
//!   [`Store::known_fates`]; a known fate means "already done, just commit the position".
//! - Dead letters are rows of their own with a status (`dead`, `replayed`, `skipped`). A replay
//!   makes the message a fresh delivery (a [`ScheduledRetry`] due now, attempt 0), marks the
//!   row `replayed` (history kept) and clears the fate, so the new fate replaces the old one.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::clock::Timestamp;
use crate::scheduler::RetryScheduler;

mod rows;
pub mod schema;
pub mod sqlite;
pub mod writer;
mod writes;

pub use sqlite::{DB_FILE, DEFAULT_DATA_DIR, SqliteOptions, SqliteStore, Synchronous};
pub use writer::{BatchWriter, BatchWriterOptions};

/// A message's stable id, from its source (offset, order number…).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageId(pub String);

/// The id of the rule that decided (`"defaults"` when no rule matched).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleId(pub String);

/// The version (hash) of the rule set that decided.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleSetVersion(pub String);

/// The row id of one dead letter. A message dead-lettered, replayed and dead-lettered again
/// has two dead letters, with two ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeadLetterId(pub i64);

macro_rules! string_newtype {
    ($($t:ident),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl From<&str> for $t {
            fn from(s: &str) -> Self {
                $t(s.to_owned())
            }
        }
        impl From<String> for $t {
            fn from(s: String) -> Self {
                $t(s)
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl std::borrow::Borrow<str> for $t {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    )*};
}
string_newtype!(MessageId, RuleId, RuleSetVersion);

impl fmt::Display for DeadLetterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Message headers, string to string.
pub type Headers = BTreeMap<String, String>;

/// What a spout emitted: enough to deliver the message again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Stable id from the source.
    pub id: MessageId,
    /// Business type (`ORDER`, `PAYMENT`…).
    pub biz: String,
    /// The payload bytes, unchanged.
    pub payload: Vec<u8>,
    /// The headers, unchanged.
    pub headers: Headers,
}

/// The retry metadata a message carries the whole way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryMeta {
    /// Deliveries so far (the redelivery will be attempt `attempt + 1`).
    pub attempt: u32,
    /// When the first delivery began.
    pub first_seen: Timestamp,
    /// Code of the last failure.
    pub last_code: String,
    /// Message of the last failure.
    pub last_message: String,
    /// The delay chosen for this retry.
    pub last_delay: Duration,
    /// The deciding rule.
    pub rule: RuleId,
    /// The rule set version that decided.
    pub rule_set_version: RuleSetVersion,
}

/// A message waiting for its retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledRetry {
    /// The message to deliver again.
    pub message: Message,
    /// When to deliver it.
    pub due: Timestamp,
    /// Its retry metadata.
    pub meta: RetryMeta,
}

/// A message the rules gave up on, as the runtime writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The message, kept whole so it can be replayed.
    pub message: Message,
    /// The dead-letter label from the rule (`L1`…).
    pub label: String,
    /// Why it was given up on (`give_up`, `max_retries`, `max_elapsed`).
    pub reason: String,
    /// Code of the last failure.
    pub last_code: String,
    /// Message of the last failure.
    pub last_message: String,
    /// Deliveries made.
    pub attempts: u32,
    /// When the first delivery began.
    pub first_time: Timestamp,
    /// When it was dead-lettered.
    pub last_time: Timestamp,
    /// The deciding rule.
    pub rule: RuleId,
    /// The rule set version that decided.
    pub rule_set_version: RuleSetVersion,
}

/// Where a dead letter stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadLetterStatus {
    /// Waiting for an operator.
    Dead,
    /// Sent back into the topology as a fresh delivery.
    Replayed,
    /// Marked handled by an operator.
    Skipped,
}

impl DeadLetterStatus {
    /// The name stored and shown: `dead`, `replayed`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterStatus::Dead => "dead",
            DeadLetterStatus::Replayed => "replayed",
            DeadLetterStatus::Skipped => "skipped",
        }
    }

    /// Parses [`DeadLetterStatus::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "dead" => Some(DeadLetterStatus::Dead),
            "replayed" => Some(DeadLetterStatus::Replayed),
            "skipped" => Some(DeadLetterStatus::Skipped),
            _ => None,
        }
    }
}

impl fmt::Display for DeadLetterStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dead letter as stored: its id, status and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDeadLetter {
    /// Row id (the paging cursor).
    pub id: DeadLetterId,
    /// Current status.
    pub status: DeadLetterStatus,
    /// What was written.
    pub letter: DeadLetter,
}

/// The final fate of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Its tuple tree completed.
    Acked,
    /// Its dead letter is stored.
    DeadLettered,
}

/// One write. [`Store::apply`] applies a slice of them, in order, in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// Schedule (or move) a retry; replaces any row for the same message id. Refused
    /// ([`Applied::FateAlreadyKnown`]) if the message already has a final fate.
    Schedule(ScheduledRetry),
    /// Forget a scheduled retry (cancelled). Unknown ids are ignored.
    Unschedule(MessageId),
    /// The message was acked: record the fate, drop its retry row.
    Acked(MessageId, Timestamp),
    /// The message was dead-lettered: store the letter and the fate, drop its retry row.
    DeadLetter(DeadLetter),
    /// A spout committed its source position.
    Position {
        /// The source's name.
        source: String,
        /// The committed position.
        position: u64,
    },
}

/// What happened to one [`WriteOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Written.
    Done,
    /// Not written: the message already has this final fate (first fate wins).
    FateAlreadyKnown(Fate),
}

/// Filters and paging for [`Store::dead_letters`]. Newest first; all filters are optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterFilter {
    /// Exact label (`L1`).
    pub label: Option<String>,
    /// Exact biz.
    pub biz: Option<String>,
    /// Exact last code.
    pub code: Option<String>,
    /// Only this status.
    pub status: Option<DeadLetterStatus>,
    /// Dead-lettered at or after (on `last_time`).
    pub since: Option<Timestamp>,
    /// Dead-lettered before (on `last_time`).
    pub until: Option<Timestamp>,
    /// Paging cursor: only ids below this (pass the previous page's `next`).
    pub before: Option<DeadLetterId>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

/// The largest page [`Store::dead_letters`] and [`Store::audit_log`] return.
pub const MAX_PAGE: usize = 1000;

impl Default for DeadLetterFilter {
    fn default() -> Self {
        DeadLetterFilter {
            label: None,
            biz: None,
            code: None,
            status: None,
            since: None,
            until: None,
            before: None,
            limit: 100,
        }
    }
}

/// One page of results, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T, C> {
    /// The items.
    pub items: Vec<T>,
    /// The cursor for the next (older) page, if there may be one.
    pub next: Option<C>,
}

/// What an operator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// Replayed a dead letter.
    Replay,
    /// Skipped (marked handled) a dead letter.
    Skip,
}

impl AuditAction {
    /// `replay` or `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Replay => "replay",
            AuditAction::Skip => "skip",
        }
    }
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Row id (the paging cursor).
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// What.
    pub action: AuditAction,
    /// Which message.
    pub message_id: MessageId,
    /// Which dead letter.
    pub dead_letter: DeadLetterId,
    /// Who (as given, trimmed).
    pub operator: String,
    /// Why (as given, trimmed).
    pub reason: String,
}

/// Filters and paging for [`Store::audit_log`]. Newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this message.
    pub message_id: Option<MessageId>,
    /// Paging cursor: only ids below this.
    pub before: Option<i64>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl Default for AuditFilter {
    fn default() -> Self {
        AuditFilter {
            message_id: None,
            before: None,
            limit: 100,
        }
    }
}

/// Everything that can go wrong in a store. Each message names what and where.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data directory could not be created.
    #[error("cannot create data directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The database file could not be opened or configured.
    #[error("cannot open database {path}: {source}")]
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The file was written by a newer Rebound: refuse rather than misread it.
    #[error(
        "database {path} has schema version {found}, but this build of rebound understands \
         versions up to {supported}; run a newer rebound or point --data at another directory"
    )]
    NewerSchema {
        /// The file.
        path: std::path::PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
    /// The file is a SQLite database, but not one of ours.
    #[error("{path} is not a rebound database (application_id {found:#x}, expected {expected:#x})")]
    NotRebound {
        /// The file.
        path: std::path::PathBuf,
        /// The application id found.
        found: i32,
        /// Ours.
        expected: i32,
    },
    /// A migration failed; the file is left at version `from` (each step is a transaction).
    #[error("migrating {path} from schema version {from} to {to}: {source}")]
    Migrate {
        /// The file.
        path: std::path::PathBuf,
        /// Version before the failed step.
        from: u32,
        /// Version the step aimed at.
        to: u32,
        /// The cause.
        source: rusqlite::Error,
    },
    /// Any other SQLite failure.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored value could not be decoded.
    #[error("corrupt {what} in table {table}: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The column or value.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A value does not fit the store's integer columns.
    #[error("{what} {value} is out of range (at most {max})")]
    OutOfRange {
        /// Which value.
        what: &'static str,
        /// The value.
        value: u128,
        /// The largest storable.
        max: u64,
    },
    /// An operator action without an operator name or a reason.
    #[error("{field} is required and must not be blank")]
    Blank {
        /// `operator` or `reason`.
        field: &'static str,
    },
    /// No dead letter for this message.
    #[error("no dead letter for message {0}")]
    DeadLetterNotFound(MessageId),
    /// The message's dead letter was already replayed or skipped.
    #[error("the dead letter for message {id} is already {status}; nothing to do")]
    AlreadyHandled {
        /// The message.
        id: MessageId,
        /// Its status.
        status: DeadLetterStatus,
    },
    /// The [`BatchWriter`] thread has stopped.
    #[error("the store's batch writer has stopped")]
    WriterClosed,
}

/// Shorthand for store results.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The durable store. One embedded implementation ([`SqliteStore`]); a shared one can replace
/// it later behind the same trait.
///
/// Every write method takes a slice and writes it in one transaction: all or nothing.
pub trait Store: Send + Sync {
    /// Where the store keeps its data, for messages (for SQLite, the database file).
    fn location(&self) -> String;

    /// Applies `ops` in order, in one transaction. Returns one [`Applied`] per op.
    fn apply(&self, ops: &[WriteOp]) -> Result<Vec<Applied>>;

    /// Schedules (upserts) retries, in one transaction; like [`WriteOp::Schedule`], a message
    /// with a final fate is not scheduled.
    fn schedule_retries(&self, batch: &[ScheduledRetry]) -> Result<Vec<Applied>>;

    /// Forgets scheduled retries (cancelled); unknown ids are ignored.
    fn unschedule(&self, ids: &[MessageId]) -> Result<()>;

    /// Records dead letters (and their fates), in one transaction.
    fn record_dead_letters(&self, batch: &[DeadLetter]) -> Result<Vec<Applied>>;

    /// Records acks at `at`, in one transaction.
    fn record_acked(&self, ids: &[MessageId], at: Timestamp) -> Result<Vec<Applied>>;

    /// Every scheduled retry's id and due time, for [`recover`]. Payloads stay on disk.
    fn scheduled(&self) -> Result<Vec<(MessageId, Timestamp)>>;

    /// The full scheduled retries for these ids (those that exist), e.g. when they come due.
    fn retries(&self, ids: &[MessageId]) -> Result<Vec<ScheduledRetry>>;

    /// The final fate of one message, if known.
    fn fate_of(&self, id: &MessageId) -> Result<Option<Fate>>;

    /// The known fates among `ids` (ids without a fate are left out).
    fn known_fates(&self, ids: &[MessageId]) -> Result<Vec<(MessageId, Fate)>>;

    /// Forgets `acked` fates recorded before `before` (once the source position is committed
    /// past them, redelivery cannot happen). Dead-letter fates are kept. Returns how many.
    fn prune_acked(&self, before: Timestamp) -> Result<u64>;

    /// Lists dead letters, newest first, filtered and paged.
    fn dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<Page<StoredDeadLetter, DeadLetterId>>;

    /// The latest dead letter of a message (any status), if there is one.
    fn dead_letter(&self, id: &MessageId) -> Result<Option<StoredDeadLetter>>;

    /// Replays the message's open dead letter: marks it `replayed`, clears the fate, schedules
    /// the message as a fresh delivery due now (attempt 0) and writes the audit log, in one
    /// transaction. Returns the new retry, which the caller also puts in its live scheduler.
    fn replay(&self, id: &MessageId, operator: &str, reason: &str) -> Result<ScheduledRetry>;

    /// Marks the message's open dead letter `skipped` (handled) and writes the audit log.
    fn skip(&self, id: &MessageId, operator: &str, reason: &str) -> Result<StoredDeadLetter>;

    /// Lists the audit log, newest first.
    fn audit_log(&self, filter: &AuditFilter) -> Result<Page<AuditEntry, i64>>;

    /// Records a spout's committed source position.
    fn commit_position(&self, source: &str, position: u64) -> Result<()>;

    /// The last committed position of a source.
    fn position(&self, source: &str) -> Result<Option<u64>>;
}

/// Loads every scheduled retry from `store` into `scheduler` with its original due time.
/// Retries that came due while the process was down are due at once. Returns how many.
///
/// ```
/// # use rebound_runtime::{clock::*, scheduler::RetryScheduler, store::*};
/// # use std::sync::Arc;
/// # let dir = tempfile::tempdir().unwrap();
/// let clock: SharedClock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000)));
/// let store = SqliteStore::open(dir.path(), clock.clone())?;
/// let mut scheduler = RetryScheduler::new(clock);
/// let n = recover(&store, &mut scheduler)?;
/// assert_eq!(n, scheduler.len());
/// # Ok::<(), StoreError>(())
/// ```
pub fn recover(store: &dyn Store, scheduler: &mut RetryScheduler<MessageId>) -> Result<usize> {
    let scheduled = store.scheduled()?;
    let n = scheduled.len();
    for (id, due) in scheduled {
        scheduler.schedule(id, due);
    }
    Ok(n)
}
