//! Durable state behind one small [`Store`] trait: scheduled retries, dead letters, the audit
//! log, message fates, source positions and the decision log.
//!
//! - [`sqlite`]: the embedded default, one SQLite file (`rebound.db`) in the data directory.
//! - The shared store, several nodes on one Redis 7, is crate `rebound-store-redis`: the same
//!   contract and the claims of due retries ([`ClaimQueue`]); [`fields`] gives it the records
//!   as named fields, encoded as SQLite's columns.
//! - [`schema`]: the schema, its version, and the migrations run on open.
//!
//! The store persists the runtime's own records, encoded once (`rows.rs`): a
//! [`Message`] with its [`RetryMeta`](crate::topology::RetryMeta) for a retry, and a
//! [`DeadLetter`] (message, failure with its attrs, decision) for a dead letter.
//!
//! # The contract
//!
//! Writes go through [`Store::apply`] only, as [`WriteOp`]s, in order, all in one transaction;
//! the journal (`durable::Journal`) is the one writer. Reads are the few production needs.
//! Every implementation must pass the conformance suite (feature `conformance`:
//! `store::conformance` and `conformance_suite!`; it takes any `&dyn Store`). What it asks:
//!
//! - A retry the rules schedule is a row (upsert by message id) that stays while the retry is
//!   pending *and while the redelivery is in flight*; it goes away in the same transaction that
//!   records the message's fate. So a crash at any point leaves the retry scheduled.
//! - A message's fate ([`Fate`]) is kept per id, first fate wins: a second fate for the same id
//!   is refused and reported as [`Applied::FateAlreadyKnown`], and a retry for a message with a
//!   fate is refused the same way.
//! - An acked fate may carry the message's source [`Offset`]; once that source's position
//!   ([`WriteOp::Position`]) reaches it, the fate is pruned in the same transaction: the
//!   position is the record of everything at or below it. An acked fate without one (a
//!   broker source's) is pruned by time ([`WriteOp::PruneFates`], which the journal sends with
//!   `fates_keep`). Fates stay bounded.
//! - Dead letters are rows of their own with a status (`dead`, `replayed`, `skipped`). A replay
//!   makes the message a fresh delivery (a retry due at once, attempt 0), marks the letter
//!   `replayed` (history kept), clears the fate and writes the audit log; a skip marks it
//!   `skipped` and writes the audit log.
//! - The decision log ([`WriteOp::LogDecisions`], [`Store::decisions`]) is a bounded sample,
//!   not a record: entries are appended in order (a [`DecisionPage`] of them an op) and only
//!   the newest `keep` stay, trimmed in the same transaction. It touches nothing else (no
//!   retry row, no fate, no audit line).
//! - Every op is safe to apply twice (a batch whose commit reply was lost is applied again):
//!   upserts, first fate wins, positions only move forward, and an operator action on a letter
//!   already handled is refused, not repeated.

pub use crate::fate::DeadLetter;
use crate::time::Timestamp;
pub use crate::topology::{Message, MessageId};
use rebound_engine::release::LoggedDecision;

mod claims;
#[cfg(feature = "conformance")]
#[path = "../../conformance/mod.rs"]
pub mod conformance;
mod decisions;
mod error;
mod failures;
pub mod fields;
mod records;
mod rows;
pub mod schema;
pub mod sqlite;
mod values;
mod writes;

pub use claims::{ClaimQueue, ClaimToken, Claimed, Reaped};
pub use decisions::{DecisionFilter, DecisionPage, decision_from_json, decision_to_json};
pub use error::StoreError;
pub use failures::record_json;
pub use records::{
    AuditAction, AuditEntry, AuditFilter, DeadLetterFilter, DeadLetterStatus, Fate, MAX_PAGE,
    NotACursor, OpenLetters, Page, RetryCursor, RetryFilter, StoredDeadLetter,
};
pub use sqlite::{DB_FILE, DEFAULT_DATA_DIR, SqliteOptions, SqliteStore, Synchronous};

/// The row id of one dead letter. A message dead-lettered, replayed and dead-lettered again
/// has two dead letters, with two ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeadLetterId(pub i64);

impl std::fmt::Display for DeadLetterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A message waiting for its retry: the message (its `retry` metadata already updated with the
/// failure and the decision) and when to deliver it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledRetry {
    /// The message to deliver again.
    pub message: Message,
    /// When to deliver it.
    pub due: Timestamp,
    /// On a shared store: the claim this retry is written under (the one its last delivery
    /// came from), or the claim [`ClaimQueue::claim`] just made. `None` for a retry of a
    /// delivery that came from its source, and on a store of one's own. Not stored: a claim
    /// is the store's.
    pub claim: Option<ClaimToken>,
}

impl ScheduledRetry {
    /// `message`, due at `due`, under no claim.
    pub fn new(message: Message, due: Timestamp) -> ScheduledRetry {
        ScheduledRetry {
            message,
            due,
            claim: None,
        }
    }
}

/// A source's name, interned: a process has few sources, so an [`Offset`] carries a copied
/// pointer, with no reference count to touch on every ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceName(&'static str);

impl SourceName {
    /// The name.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl From<&str> for SourceName {
    fn from(name: &str) -> Self {
        SourceName(crate::topology::tuple::intern(name))
    }
}

impl std::ops::Deref for SourceName {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

/// Where a message sits in its source: the source's name and the message's position in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offset {
    /// The source, as its [`WriteOp::Position`]s name it.
    pub source: SourceName,
    /// The message's position (numbered from 1).
    pub position: u64,
}

/// How a message's [`offset`](Message::offset) names its source and position, for a topology
/// whose spout reads several positioned sources (partitions).
pub type OffsetOf = Box<dyn Fn(&Message) -> Option<Offset> + Send + Sync>;

/// An operator's action on a dead letter, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAction {
    /// The message whose open dead letter is acted on.
    pub id: MessageId,
    /// Who acts (trimmed, not blank).
    pub operator: String,
    /// Why (trimmed, not blank).
    pub reason: String,
    /// When.
    pub at: Timestamp,
}

impl OperatorAction {
    /// An action by `operator` for `reason` at `at`; both are trimmed and must not be blank.
    pub fn new(
        id: MessageId,
        operator: &str,
        reason: &str,
        at: Timestamp,
    ) -> Result<OperatorAction> {
        let required = |field, value: &str| {
            let value = value.trim();
            if value.is_empty() {
                Err(StoreError::Blank { field })
            } else {
                Ok(value.to_owned())
            }
        };
        Ok(OperatorAction {
            id,
            operator: required("operator", operator)?,
            reason: required("reason", reason)?,
            at,
        })
    }
}

/// The same operator action on every message of `ids` (a bulk action), as the ops of one
/// batch: `op` makes each (`WriteOp::Replay`, `WriteOp::Skip`). A blank operator or reason
/// is refused before any op is made.
pub fn bulk_actions(
    ids: &[MessageId],
    operator: &str,
    reason: &str,
    at: Timestamp,
    op: fn(OperatorAction) -> WriteOp,
) -> Result<Vec<WriteOp>> {
    ids.iter()
        .map(|id| Ok(op(OperatorAction::new(id.clone(), operator, reason, at)?)))
        .collect()
}

/// The most fates one [`WriteOp::PruneFates`] may forget on a store that prunes in steps.
pub const PRUNE_AT_MOST: usize = 10_000;

/// One write. [`Store::apply`] applies a slice of them, in order, in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    /// Schedule (or move) a retry; replaces any row for the same message id. Refused
    /// ([`Applied::FateAlreadyKnown`]) if the message already has a final fate. On a shared
    /// store, a retry decided for a delivery that came from a claim carries the claim's token
    /// (`claim`), and is refused ([`Applied::Stale`]) unless the row is still in
    /// flight under that token; one without a token is refused if the row is in flight.
    Schedule(ScheduledRetry),
    /// The message was acked: record the fate (with its offset, if it has one), drop its retry
    /// row.
    Acked {
        /// The message.
        id: MessageId,
        /// When its tree completed.
        at: Timestamp,
        /// Where it sits in its source, if its source commits a position.
        offset: Option<Offset>,
    },
    /// The message was dead-lettered: store the letter and the fate, drop its retry row.
    DeadLetter(Box<DeadLetter>),
    /// A source committed its position: every message at or below it has its fate. Acked fates
    /// of the source at or below it are pruned. A lower position than the stored one is
    /// ignored.
    Position {
        /// The source's name.
        source: String,
        /// The committed position.
        position: u64,
        /// When.
        at: Timestamp,
    },
    /// Forget the acked fates recorded without an offset before `before` (a broker source's,
    /// which commits no position that would prune them): a source keeps them only to know a
    /// redelivery of a message whose fate is known, and a broker redelivers within minutes
    /// if at all. Once pruned, the message is unknown to the store: a redelivery of it is a
    /// new delivery. Dead letters' fates and fates with an offset are kept. A shared store may
    /// prune in steps (at most [`PRUNE_AT_MOST`] fates per op): what is left goes with the
    /// next one.
    PruneFates {
        /// Fates recorded (acked) before this are forgotten.
        before: Timestamp,
    },
    /// Replay the message's open (or expired) dead letter ([`Applied::Replayed`]).
    Replay(OperatorAction),
    /// Replay the message's open dead letter for its label's `redrive` (the runtime's own
    /// replay, audited as a replay): the fresh delivery counts one more redrive.
    Redrive(OperatorAction),
    /// Skip (mark handled) the message's open (or expired) dead letter ([`Applied::Skipped`]).
    Skip(OperatorAction),
    /// Mark the message's open dead letter `expired` (audited).
    Expire(OperatorAction),
    /// Fire the message's scheduled retry now (due at the action's time, attempt kept),
    /// audited; refused ([`Applied::NoRetry`]) unless it is scheduled and not in flight.
    RetryNow(OperatorAction),
    /// Write an audit line only (an action whose effect other ops carry, in the same batch:
    /// a kill is this and the dead letter).
    Audit(AuditAction, OperatorAction),
    /// Append `decisions` to the decision log, in order, then keep only the newest `keep`
    /// entries of the whole log (`keep` 0 empties it). Writes no retry row, no fate and no
    /// audit line. Applied twice, the entries are logged twice (then trimmed as once): the
    /// log is a sample for analysis, not a record, and a batch replayed after a lost reply
    /// may leave a decision in it two times.
    LogDecisions {
        /// The decisions, oldest first, their texts written.
        decisions: DecisionPage,
        /// How many entries the log keeps (`decisions.keep`).
        keep: u64,
    },
}

impl WriteOp {
    /// The message whose retry row this op writes or drops, if any.
    pub fn retry_row(&self) -> Option<&MessageId> {
        match self {
            WriteOp::Schedule(s) => Some(&s.message.id),
            WriteOp::Acked { id, .. } => Some(id),
            WriteOp::DeadLetter(d) => Some(d.id()),
            WriteOp::Replay(a) | WriteOp::Redrive(a) => Some(&a.id),
            // Moves a row, and must find it: a retry held back from the store is not moot.
            WriteOp::Position { .. }
            | WriteOp::PruneFates { .. }
            | WriteOp::RetryNow(_)
            | WriteOp::Skip(_)
            | WriteOp::Expire(_)
            | WriteOp::Audit(..)
            | WriteOp::LogDecisions { .. } => None,
        }
    }
}

/// What happened to one [`WriteOp`].
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// Written.
    Done,
    /// Not written: the message already has this final fate (first fate wins).
    FateAlreadyKnown(Fate),
    /// The replay was written: the message is scheduled as a fresh delivery.
    Replayed(Box<ScheduledRetry>),
    /// The skip was written: the letter as it now stands.
    Skipped(Box<StoredDeadLetter>),
    /// Not written: the message has no dead letter.
    NoDeadLetter,
    /// Not written: the message's latest dead letter is already replayed or skipped (or, for
    /// a redrive or an expiry, not open).
    AlreadyHandled(DeadLetterStatus),
    /// Not written: the message has no scheduled retry that is not in flight.
    NoRetry,
    /// Not written (a shared store only): the op was made under a claim ([`ClaimToken`]) that
    /// is no longer this node's: its lease ran out and the retry was reaped, and perhaps
    /// claimed by another node. The fleet goes on with what it did meanwhile.
    Stale,
}

impl Applied {
    /// The answer to a replay of `id`'s dead letter as a result: the retry now scheduled, or the
    /// error that names the refusal.
    pub fn into_replayed(self, id: &MessageId) -> Result<ScheduledRetry> {
        match self {
            Applied::Replayed(retry) => Ok(*retry),
            other => Err(other.refusal(id)),
        }
    }

    /// The answer to a skip of `id`'s dead letter as a result: the letter as it now stands, or
    /// the error that names the refusal.
    pub fn into_skipped(self, id: &MessageId) -> Result<StoredDeadLetter> {
        match self {
            Applied::Skipped(letter) => Ok(*letter),
            other => Err(other.refusal(id)),
        }
    }

    /// The answer to an op that answers [`Applied::Done`] when written, as a result.
    pub fn into_done(self, id: &MessageId) -> Result<()> {
        match self {
            Applied::Done => Ok(()),
            other => Err(other.refusal(id)),
        }
    }

    fn refusal(self, id: &MessageId) -> StoreError {
        match self {
            Applied::NoDeadLetter => StoreError::DeadLetterNotFound(id.clone()),
            Applied::NoRetry => StoreError::RetryNotFound(id.clone()),
            Applied::AlreadyHandled(status) => StoreError::AlreadyHandled {
                id: id.clone(),
                status,
            },
            other => unexpected(other),
        }
    }
}

/// Shorthand for store results.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The durable store: [`Store::apply`] for every write, and the reads production needs. One
/// embedded implementation ([`SqliteStore`]); a shared one plugs in behind the same trait and
/// passes the same conformance suite. See the [module docs](self) for the contract.
pub trait Store: Send + Sync {
    /// Where the store keeps its data, for messages (for SQLite, the database file).
    fn location(&self) -> String;

    /// Applies `ops` in order, in one transaction. Returns one [`Applied`] per op. (The shared
    /// store's transactions hold up to 500 ops, and up to 200 logged decisions, a larger
    /// [`WriteOp::LogDecisions`] being split: a larger batch is several, in order, all
    /// checked before the first; one that fails leaves the ones before it written, and the
    /// batch applied again ends as if applied once, as every op is safe to apply twice.)
    fn apply(&self, ops: &[WriteOp]) -> Result<Vec<Applied>>;

    /// Every scheduled retry's id and due time, due order (equal due times in the order they
    /// were scheduled). Payloads stay in the store.
    fn scheduled(&self) -> Result<Vec<(MessageId, Timestamp)>>;

    /// The full scheduled retries for these ids (those that exist).
    fn retries(&self, ids: &[MessageId]) -> Result<Vec<ScheduledRetry>>;

    /// The known fates among `ids` (ids without a fate, or whose acked fate was pruned behind
    /// a position, are left out).
    fn known_fates(&self, ids: &[MessageId]) -> Result<Vec<(MessageId, Fate)>>;

    /// Lists dead letters, newest first, filtered and paged.
    fn dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<Page<StoredDeadLetter, DeadLetterId>>;

    /// The latest dead letter of a message (any status), if there is one.
    fn dead_letter(&self, id: &MessageId) -> Result<Option<StoredDeadLetter>>;

    /// How many dead letters pass `filter` (its paging aside).
    fn dead_letter_count(&self, filter: &DeadLetterFilter) -> Result<u64>;

    /// The open (`dead`) letters by label: how many, how many are older than the label's
    /// cutoff in `overdue_before` (labels without one count none), and the oldest.
    fn open_letters(&self, overdue_before: &[(String, Timestamp)]) -> Result<Vec<OpenLetters>>;

    /// Scheduled retries (rows not in flight on a shared store), soonest first, filtered and
    /// paged; `next` is the cursor of the page's last retry if there may be more.
    fn scheduled_retries(&self, filter: &RetryFilter) -> Result<Page<ScheduledRetry, RetryCursor>>;

    /// Lists the audit log, newest first.
    fn audit_log(&self, filter: &AuditFilter) -> Result<Page<AuditEntry, i64>>;

    /// The last committed position of a source.
    fn position(&self, source: &str) -> Result<Option<u64>>;

    /// The decision log: the entries that pass `filter` (made at or after `since`, the newest
    /// `limit`), oldest first. An entry that does not parse is skipped with a warning.
    fn decisions(&self, filter: &DecisionFilter) -> Result<Vec<LoggedDecision>>;
}

/// Replays the message's open dead letter directly in `store` (for a store no journal writes
/// to: no topology runs). Returns the retry now scheduled.
pub fn replay(store: &dyn Store, action: OperatorAction) -> Result<ScheduledRetry> {
    let id = action.id.clone();
    apply_one(store, WriteOp::Replay(action))?.into_replayed(&id)
}

/// Skips the message's open dead letter directly in `store`. Returns the letter as it now
/// stands.
pub fn skip(store: &dyn Store, action: OperatorAction) -> Result<StoredDeadLetter> {
    let id = action.id.clone();
    apply_one(store, WriteOp::Skip(action))?.into_skipped(&id)
}

fn apply_one(store: &dyn Store, op: WriteOp) -> Result<Applied> {
    let mut applied = store.apply(std::slice::from_ref(&op))?;
    applied.pop().ok_or_else(|| unexpected(Applied::Done))
}

/// A store that answered an op with something the op cannot produce.
fn unexpected(applied: Applied) -> StoreError {
    StoreError::Corrupt {
        table: "store",
        what: "reply",
        detail: format!("unexpected answer {applied:?}"),
    }
}
