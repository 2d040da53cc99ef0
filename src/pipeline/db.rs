//! `pipeline.db`: the bundled pipeline's own SQLite file in the data directory, next to the
//! store's `rebound.db`.
//!
//! - `orders`: what the store bolt writes, one row per order id (`INSERT OR IGNORE`: a second
//!   write of the same order is a duplicate, absorbed).
//! - `counters`: `duplicates` and `out_of_order`, updated in the same transaction as the
//!   orders, so they are exact.
//! - `events`: a keyed run's events that reached the store, by order and place in it, each
//!   marked once an earlier event of its order arrived after it (`out_of_order`).
//! - `run`: the run this directory holds (messages, keyed or not, time scale, when it
//!   finished).
//! - `sessions`: one row per process that worked on the run, checkpointed every fraction of a
//!   second: its running time and its counters (retries by rule, failures by code, latencies,
//!   what its budgets and breakers did).
//!   A `kill -9` loses at most the last checkpoint's worth of these counters; the fates, the
//!   dead letters and the duplicates are exact.
//!
//! A file of its own (rather than tables in `rebound.db`) keeps the orders' commits from
//! queueing behind the runtime's on one write lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use super::report::{BreakerShare, BudgetShare};
use rebound_runtime::stats::{Histogram, StatsSnapshot};

/// The file name in the data directory.
pub const PIPELINE_DB: &str = "pipeline.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS run (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    messages    INTEGER,
    time_scale  REAL NOT NULL,
    created_ms  INTEGER NOT NULL,
    finished_ms INTEGER,
    keyed       INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sessions (
    id           INTEGER PRIMARY KEY,
    started_ms   INTEGER NOT NULL,
    elapsed_ms   INTEGER NOT NULL,
    emitted_high INTEGER NOT NULL,
    stats        TEXT NOT NULL,
    ended        TEXT
);
CREATE TABLE IF NOT EXISTS orders (
    order_id     TEXT PRIMARY KEY NOT NULL,
    biz          TEXT NOT NULL,
    customer     TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    currency     TEXT NOT NULL,
    items        INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    written_ms   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (
    name  TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO counters (name, value) VALUES ('duplicates', 0);
INSERT OR IGNORE INTO counters (name, value) VALUES ('out_of_order', 0);
CREATE TABLE IF NOT EXISTS events (
    order_id     TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    overtaken    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (order_id, seq)
) WITHOUT ROWID;
";

/// An error of `pipeline.db`, with the file it concerns.
#[derive(Debug, thiserror::Error)]
#[error("pipeline database {path}: {source}")]
pub struct DbError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: rusqlite::Error,
}

/// Opens a connection to `pipeline.db` in `dir` (WAL, `synchronous=FULL`), creating the
/// tables if needed.
pub(crate) fn connect(dir: &Path) -> Result<Connection, DbError> {
    let path = dir.join(PIPELINE_DB);
    let err = |source| DbError {
        path: path.clone(),
        source,
    };
    let conn = Connection::open(&path).map_err(err)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
    let _: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    conn.execute_batch(SCHEMA).map_err(err)?;
    // A file made before keyed runs has no `keyed` column: its run is not keyed.
    let keyed: i64 = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('run') WHERE name = 'keyed'",
            [],
            |r| r.get(0),
        )
        .map_err(err)?;
    if keyed == 0 {
        conn.execute_batch("ALTER TABLE run ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0")
            .map_err(err)?;
    }
    Ok(conn)
}

/// The run a data directory holds.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// How many messages (`None`: unbounded, as under `serve`).
    pub messages: Option<u64>,
    /// Its messages are a keyed run's events (`--keyed`).
    pub keyed: bool,
    /// The time scale it runs at.
    pub time_scale: f64,
    /// When it was created (Unix ms).
    pub created_ms: u64,
    /// When it reached its end (Unix ms), if it did.
    pub finished_ms: Option<u64>,
}

/// A histogram as stored in a session's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredHistogram {
    /// Bucket counts.
    pub buckets: Vec<u64>,
    /// Sum of observations, in nanoseconds.
    pub sum_ns: u64,
    /// Observations.
    pub count: u64,
}

impl From<&Histogram> for StoredHistogram {
    fn from(h: &Histogram) -> Self {
        StoredHistogram {
            buckets: h.buckets.to_vec(),
            sum_ns: h.sum.as_nanos().min(u128::from(u64::MAX)) as u64,
            count: h.count,
        }
    }
}

impl StoredHistogram {
    /// Back to a [`Histogram`] (extra buckets, from a different build, are folded into the
    /// last one).
    pub fn histogram(&self) -> Histogram {
        let mut h = Histogram::default();
        let last = h.buckets.len() - 1;
        for (i, c) in self.buckets.iter().enumerate() {
            h.buckets[i.min(last)] += c;
        }
        h.sum = Duration::from_nanos(self.sum_ns);
        h.count = self.count;
        h
    }
}

/// A session's counters, as checkpointed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStats {
    /// Deliveries (first deliveries and retries).
    pub deliveries: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Retries by deciding rule.
    pub retries_by_rule: BTreeMap<String, u64>,
    /// Failed trees by code.
    pub failures_by_code: BTreeMap<String, u64>,
    /// Bolt panics.
    pub panics: u64,
    /// Complete latency of acked deliveries.
    pub latency: StoredHistogram,
    /// Delays of scheduled retries.
    pub retry_delay: StoredHistogram,
    /// What the retry gate's budgets did in the session (the report's `budgets`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub budgets: BTreeMap<String, BudgetShare>,
    /// What its breakers and the fuse did in the session (the report's `breakers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub breakers: BTreeMap<String, BTreeMap<String, BreakerShare>>,
}

impl From<&StatsSnapshot> for SessionStats {
    fn from(s: &StatsSnapshot) -> Self {
        SessionStats {
            deliveries: s.emitted,
            retries: s.retries,
            retries_by_rule: s.retries_by_rule.clone(),
            failures_by_code: s.failures_by_code.clone(),
            panics: s.panics,
            latency: (&s.complete_latency).into(),
            retry_delay: (&s.retry_delay).into(),
            budgets: BTreeMap::new(),
            breakers: BTreeMap::new(),
        }
    }
}

/// What one checkpoint writes of a session: its time and counters so far, and at its last
/// one how it ended.
#[derive(Clone, Copy, Debug)]
pub struct Checkpoint<'a> {
    /// The session's id ([`PipelineDb::begin_session`]'s answer).
    pub session: i64,
    /// How long it has run.
    pub elapsed: Duration,
    /// The highest order number it handed out.
    pub emitted_high: u64,
    /// Its counters.
    pub stats: &'a SessionStats,
    /// `finished` or `interrupted` at its last checkpoint; `None` before.
    pub ended: Option<&'a str>,
}

/// One session, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    /// Row id.
    pub id: i64,
    /// When it started (Unix ms).
    pub started_ms: u64,
    /// How long it ran, up to its last checkpoint.
    pub elapsed: Duration,
    /// The highest order number it handed out.
    pub emitted_high: u64,
    /// Its counters.
    pub stats: SessionStats,
    /// `finished`, `interrupted`, or `None` if it never ended cleanly (killed).
    pub ended: Option<String>,
}

/// The pipeline's database: a connection for the run record, sessions and reads. (The store
/// bolt's writer thread has a connection of its own.)
#[derive(Debug)]
pub struct PipelineDb {
    conn: Mutex<Connection>,
    path: PathBuf,
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl PipelineDb {
    /// Opens (creating if missing) `pipeline.db` in `dir`.
    pub fn open(dir: &Path) -> Result<PipelineDb, DbError> {
        std::fs::create_dir_all(dir).map_err(|e| DbError {
            path: dir.to_owned(),
            source: rusqlite::Error::InvalidPath(format!("{}: {e}", dir.display()).into()),
        })?;
        Ok(PipelineDb {
            conn: Mutex::new(connect(dir)?),
            path: dir.join(PIPELINE_DB),
        })
    }

    /// Opens an existing `pipeline.db` in `dir` read-only: for an observer (a test, a
    /// dashboard) while a run writes it.
    pub fn open_read_only(dir: &Path) -> Result<PipelineDb, DbError> {
        let path = dir.join(PIPELINE_DB);
        let err = |source| DbError {
            path: path.clone(),
            source,
        };
        let conn = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(err)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
        Ok(PipelineDb {
            conn: Mutex::new(conn),
            path,
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn err(&self, source: rusqlite::Error) -> DbError {
        DbError {
            path: self.path.clone(),
            source,
        }
    }

    /// The run record, if the directory holds a run.
    pub fn run(&self) -> Result<Option<RunRecord>, DbError> {
        self.conn()
            .query_row(
                "SELECT messages, time_scale, created_ms, finished_ms, keyed FROM run WHERE id = 1",
                [],
                |r| {
                    Ok(RunRecord {
                        messages: r.get::<_, Option<i64>>(0)?.map(u64_of),
                        keyed: r.get::<_, i64>(4)? != 0,
                        time_scale: r.get(1)?,
                        created_ms: u64_of(r.get(2)?),
                        finished_ms: r.get::<_, Option<i64>>(3)?.map(u64_of),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Records a new run.
    pub fn create_run(
        &self,
        messages: Option<u64>,
        keyed: bool,
        time_scale: f64,
        now_ms: u64,
    ) -> Result<(), DbError> {
        self.conn()
            .execute(
                "INSERT INTO run (id, messages, time_scale, created_ms, keyed)
                 VALUES (1, ?1, ?2, ?3, ?4)",
                params![
                    messages.map(i64_of),
                    time_scale,
                    i64_of(now_ms),
                    i64::from(keyed)
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Marks the run finished (once).
    pub fn finish_run(&self, now_ms: u64) -> Result<(), DbError> {
        self.conn()
            .execute(
                "UPDATE run SET finished_ms = ?1 WHERE id = 1 AND finished_ms IS NULL",
                [i64_of(now_ms)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Starts a session; returns its id.
    pub fn begin_session(&self, now_ms: u64, emitted_high: u64) -> Result<i64, DbError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO sessions (started_ms, elapsed_ms, emitted_high, stats) VALUES (?1, 0, ?2, '{}')",
            params![i64_of(now_ms), i64_of(emitted_high)],
        )
        .map_err(|e| self.err(e))?;
        Ok(conn.last_insert_rowid())
    }

    /// Checkpoints a session's time and counters (and how it ended, at the end).
    pub fn checkpoint(&self, c: &Checkpoint<'_>) -> Result<(), DbError> {
        let json = serde_json::to_string(c.stats).unwrap_or_else(|_| "{}".into());
        self.conn()
            .execute(
                "UPDATE sessions SET elapsed_ms = ?2, emitted_high = ?3, stats = ?4, ended = ?5
                 WHERE id = ?1",
                params![
                    c.session,
                    i64_of(c.elapsed.as_millis() as u64),
                    i64_of(c.emitted_high),
                    json,
                    c.ended
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Every session, oldest first.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, DbError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, started_ms, elapsed_ms, emitted_high, stats, ended FROM sessions ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let stats: String = r.get(4)?;
                Ok(SessionRow {
                    id: r.get(0)?,
                    started_ms: u64_of(r.get(1)?),
                    elapsed: Duration::from_millis(u64_of(r.get(2)?)),
                    emitted_high: u64_of(r.get(3)?),
                    // A session killed before its first checkpoint has `{}`: all zero.
                    stats: serde_json::from_str(&stats).unwrap_or_default(),
                    ended: r.get(5)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Deliveries the idempotent store absorbed (the order was already written).
    pub fn duplicates(&self) -> Result<u64, DbError> {
        self.counter("duplicates")
    }

    /// A keyed run's events that reached the store before an earlier event of their order.
    pub fn out_of_order(&self) -> Result<u64, DbError> {
        self.counter("out_of_order")
    }

    fn counter(&self, name: &str) -> Result<u64, DbError> {
        self.conn()
            .query_row("SELECT value FROM counters WHERE name = ?1", [name], |r| {
                r.get::<_, i64>(0)
            })
            .optional()
            .map(|v| v.map_or(0, u64_of))
            .map_err(|e| self.err(e))
    }

    /// How many orders are written.
    pub fn orders_written(&self) -> Result<u64, DbError> {
        self.conn()
            .query_row("SELECT count(*) FROM orders", [], |r| r.get::<_, i64>(0))
            .map(u64_of)
            .map_err(|e| self.err(e))
    }

    /// Whether an order is written.
    pub fn has_order(&self, id: &str) -> Result<bool, DbError> {
        self.conn()
            .query_row("SELECT 1 FROM orders WHERE order_id = ?1", [id], |_| Ok(()))
            .optional()
            .map(|v| v.is_some())
            .map_err(|e| self.err(e))
    }
}

/// One order row, as the store bolt writes it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OrderRow {
    pub(crate) id: std::sync::Arc<str>,
    pub(crate) biz: std::sync::Arc<str>,
    pub(crate) customer: String,
    pub(crate) amount_cents: i64,
    pub(crate) currency: String,
    pub(crate) items: i64,
    pub(crate) attempt: i64,
    /// A keyed run's event: its order and its place in it (boxed: most runs have none, and
    /// the row travels in every write).
    pub(crate) sequence: Option<Box<Sequence>>,
}

/// A keyed run's event's place: its order, and where in the order it comes (0: created).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sequence {
    pub(crate) order: String,
    pub(crate) place: i64,
}

/// Writes `rows` in one IMMEDIATE transaction with `INSERT OR IGNORE`, adds the rows that were
/// already there to the `duplicates` counter in the same transaction, and returns how many
/// there were. A keyed run's event written for the first time is checked in sequence: the
/// later events of its order already written (and not yet counted) were out of order, and are
/// added to `out_of_order` in the same transaction.
pub(crate) fn write_orders(
    conn: &mut Connection,
    rows: &[OrderRow],
    now_ms: u64,
) -> rusqlite::Result<u64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (mut duplicates, mut out_of_order) = (0u64, 0u64);
    {
        let mut arrived = tx.prepare_cached(
            "INSERT OR IGNORE INTO events (order_id, seq, overtaken) VALUES (?1, ?2, 0)",
        )?;
        let mut overtaken = tx.prepare_cached(
            "UPDATE events SET overtaken = 1 WHERE order_id = ?1 AND seq > ?2 AND overtaken = 0",
        )?;
        let mut stmt = tx.prepare_cached(
            "INSERT OR IGNORE INTO orders
                 (order_id, biz, customer, amount_cents, currency, items, attempt, written_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for r in rows {
            let inserted = stmt.execute(params![
                &*r.id,
                &*r.biz,
                r.customer,
                r.amount_cents,
                r.currency,
                r.items,
                r.attempt,
                i64_of(now_ms)
            ])?;
            if inserted == 0 {
                duplicates += 1;
            } else if let Some(e) = &r.sequence {
                arrived.execute(params![e.order, e.place])?;
                out_of_order += overtaken.execute(params![e.order, e.place])? as u64;
            }
        }
    }
    for (name, n) in [("duplicates", duplicates), ("out_of_order", out_of_order)] {
        if n > 0 {
            tx.execute(
                "UPDATE counters SET value = value + ?1 WHERE name = ?2",
                params![i64_of(n), name],
            )?;
        }
    }
    tx.commit()?;
    Ok(duplicates)
}
