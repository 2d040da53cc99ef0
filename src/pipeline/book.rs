//! [`RunBook`]: where the bundled pipeline keeps its own records of a run (the run's
//! parameters, each session's counters, the orders it wrote and the duplicates it absorbed),
//! beside the runtime's store. Two books: `pipeline.db` in the data directory
//! ([`PipelineDb`]), and the shared store's namespace for a fleet (`fleet/book.rs`).

use super::db::{self, Checkpoint, DbError, OrderRow, PipelineDb, RunRecord, SessionRow};

/// A book's failure, named where it happened.
#[derive(Debug, thiserror::Error)]
pub enum BookError {
    /// `pipeline.db` failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The shared store failed.
    #[error(transparent)]
    Store(#[from] rebound_runtime::store::StoreError),
}

/// The pipeline's records of its run. Blocking (call from blocking threads).
pub trait RunBook: Send + Sync {
    /// The run, if one was recorded.
    fn run(&self) -> Result<Option<RunRecord>, BookError>;
    /// Marks the run finished at `now_ms` (the first mark counts).
    fn finish_run(&self, now_ms: u64) -> Result<(), BookError>;
    /// Starts a session (this process's share of the run); returns its id.
    fn begin_session(&self, now_ms: u64, emitted_high: u64) -> Result<i64, BookError>;
    /// Writes a session's counters so far.
    fn checkpoint(&self, c: &Checkpoint<'_>) -> Result<(), BookError>;
    /// Every session of the run, oldest first.
    fn sessions(&self) -> Result<Vec<SessionRow>, BookError>;
    /// Deliveries the idempotent order sink absorbed.
    fn duplicates(&self) -> Result<u64, BookError>;
    /// A keyed run's events that reached the order sink before an earlier event of their
    /// order.
    fn out_of_order(&self) -> Result<u64, BookError>;
}

/// Where the store bolt writes orders: idempotently, one write per order id (a keyed run's
/// event id); a repeat is a duplicate, counted. A keyed run's events are checked in sequence
/// as they are first written (see [`RunBook::out_of_order`]).
pub(crate) trait OrderSink: Send {
    /// Writes `rows`; returns how many were duplicates.
    fn write(&mut self, rows: &[OrderRow], now_ms: u64) -> Result<u64, BookError>;
}

impl RunBook for PipelineDb {
    fn run(&self) -> Result<Option<RunRecord>, BookError> {
        Ok(PipelineDb::run(self)?)
    }
    fn finish_run(&self, now_ms: u64) -> Result<(), BookError> {
        Ok(PipelineDb::finish_run(self, now_ms)?)
    }
    fn begin_session(&self, now_ms: u64, emitted_high: u64) -> Result<i64, BookError> {
        Ok(PipelineDb::begin_session(self, now_ms, emitted_high)?)
    }
    fn checkpoint(&self, c: &Checkpoint<'_>) -> Result<(), BookError> {
        Ok(PipelineDb::checkpoint(self, c)?)
    }
    fn sessions(&self) -> Result<Vec<SessionRow>, BookError> {
        Ok(PipelineDb::sessions(self)?)
    }
    fn duplicates(&self) -> Result<u64, BookError> {
        Ok(PipelineDb::duplicates(self)?)
    }
    fn out_of_order(&self) -> Result<u64, BookError> {
        Ok(PipelineDb::out_of_order(self)?)
    }
}

/// `pipeline.db`'s orders table, on a connection of the writer's own.
pub(crate) struct SqliteOrders(pub(crate) rusqlite::Connection);

impl SqliteOrders {
    fn path(&self) -> std::path::PathBuf {
        self.0
            .path()
            .map(std::path::PathBuf::from)
            .unwrap_or_default()
    }
}

impl OrderSink for SqliteOrders {
    fn write(&mut self, rows: &[OrderRow], now_ms: u64) -> Result<u64, BookError> {
        db::write_orders(&mut self.0, rows, now_ms).map_err(|source| {
            BookError::Db(DbError {
                path: self.path(),
                source,
            })
        })
    }
}
