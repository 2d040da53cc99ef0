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
    /// No scheduled retry for this message (none, or it is being delivered).
    #[error("no scheduled retry for message {0}")]
    RetryNotFound(MessageId),
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
    /// A store kept elsewhere (a server several nodes share) could not do a command. Its
    /// outcome may be unknown (the reply was lost), so it is safe to run again: every write is.
    #[error("{backend} {op} on {location}: {detail}")]
    Backend {
        /// Which kind of store (`redis`): the first word of the message and the error's
        /// [`kind`](StoreError::kind) when the server was reached.
        backend: &'static str,
        /// What was being done (`apply`, `claim`, `connect`…).
        op: &'static str,
        /// Where the store is, e.g. `redis://HOST:PORT/DB namespace NS` (never a password).
        location: String,
        /// The server's or the connection's message.
        detail: String,
        /// True if the server could not be reached (refused, dropped, timed out).
        unreachable: bool,
    },
}

impl StoreError {
    /// A value the store holds that does not decode: `what` in `table`, and why.
    pub fn corrupt(
        table: &'static str,
        what: &'static str,
        detail: impl std::fmt::Display,
    ) -> Self {
        StoreError::Corrupt {
            table,
            what,
            detail: detail.to_string(),
        }
    }

    /// A short name of the failure's kind, for metrics: `unreachable`, the backend's name
    /// (`redis`), `sqlite`, `corrupt`, `closed` or `other`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Backend {
                unreachable: true, ..
            } => "unreachable",
            StoreError::Backend { backend, .. } => backend,
            StoreError::Sqlite(_) | StoreError::Open { .. } | StoreError::Migrate { .. } => {
                "sqlite"
            }
            StoreError::Corrupt { .. } => "corrupt",
            StoreError::WriterClosed => "closed",
            _ => "other",
        }
    }

    /// True if the store could not be reached (a shared store's connection is down).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            StoreError::Backend {
                unreachable: true,
                ..
            }
        )
    }
}
