//! [`StoreError`]: everything that can go wrong in a store, each naming what and where.

use super::{DeadLetterStatus, MessageId};

/// Everything that can go wrong in a store. Each message names what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The journal that writes to the store has stopped (its thread ended, or it gave up).
    #[error("the store's journal has stopped")]
    WriterClosed,
}
