//! The embedded [`Store`]: one SQLite file, `rebound.db`, in the data directory.
//!
//! - **WAL mode**, so readers (the admin API listing dead letters) never block the writer and
//!   a commit is one sequential append to the log.
//! - **`synchronous=FULL` by default**: each commit is fsynced before it returns. A commit is a
//!   promise to the source (the spout may commit its offset right after a dead letter is
//!   stored), and `NORMAL` only survives a process crash, not a power cut or kernel panic: the
//!   last transactions could roll back after the source had already moved past them. Because
//!   writes are batched, the fsync is paid once per batch; the benchmark measures both modes
//!   ([`Synchronous::Normal`] is there for users who accept that trade).
//! - One connection behind a mutex: SQLite has one writer anyway, and batching makes the
//!   number of transactions, not connections, the thing that matters.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};

use super::rows::*;
use super::schema;
use super::writes::Writes;
use super::{
    Applied, AuditAction, AuditEntry, AuditFilter, DeadLetter, DeadLetterFilter, DeadLetterId,
    DeadLetterStatus, Fate, MAX_PAGE, MessageId, Page, Result, RetryMeta, ScheduledRetry, Store,
    StoreError, StoredDeadLetter, WriteOp,
};
use crate::clock::{SharedClock, Timestamp};

/// The database file's name inside the data directory.
pub const DB_FILE: &str = "rebound.db";

/// The default data directory (`--data`).
pub const DEFAULT_DATA_DIR: &str = "rebound-data";

/// SQLite's `synchronous` setting in WAL mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// fsync on every commit: survives power loss. The default (see the module docs).
    #[default]
    Full,
    /// fsync only at checkpoints: survives a process crash (`kill -9`), but a power loss may
    /// roll back the last commits.
    Normal,
}

/// How to open a [`SqliteStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// Durability of each commit.
    pub synchronous: Synchronous,
    /// How long to wait for a lock held by another connection (another process on the file).
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// The embedded SQLite store. See the [module docs](self).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    clock: SharedClock,
}

const RETRY_COLUMNS: &str = super::writes::RETRY_COLUMNS;

const DEAD_LETTER_COLUMNS: &str = "id, status, message_id, biz, payload, headers, label, reason, \
     last_code, last_message, attempts, first_ms, last_ms, rule, rule_set_version";

impl SqliteStore {
    /// Opens (creating if missing) `rebound.db` in `data_dir` with the default options.
    /// `clock` dates the audit log and replays.
    pub fn open(data_dir: impl AsRef<Path>, clock: SharedClock) -> Result<Self> {
        Self::open_with(data_dir, clock, SqliteOptions::default())
    }

    /// Opens (creating if missing) `rebound.db` in `data_dir`, migrating an older schema and
    /// refusing a newer one.
    pub fn open_with(
        data_dir: impl AsRef<Path>,
        clock: SharedClock,
        options: SqliteOptions,
    ) -> Result<Self> {
        let dir = data_dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(DB_FILE);
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(options.busy_timeout).map_err(open_err)?;
        // Refuse a newer schema before changing anything in the file.
        schema::migrate(&mut conn, &path)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(open_err(rusqlite::Error::InvalidParameterName(format!(
                "journal_mode is {mode}, WAL is required"
            ))));
        }
        let sync = match options.synchronous {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", sync)
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
            clock,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock dropped its transaction (rolled back); the connection
        // itself is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` in one IMMEDIATE transaction (takes the write lock up front, so a concurrent
    /// writer waits on the busy timeout instead of failing mid-transaction).
    fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }
}

impl Store for SqliteStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn apply(&self, ops: &[WriteOp]) -> Result<Vec<Applied>> {
        let now = self.clock.now();
        self.write(|tx| {
            let mut w = Writes::new(tx);
            ops.iter()
                .map(|op| match op {
                    WriteOp::Schedule(r) => w.put_retry_unless_final(r),
                    WriteOp::Unschedule(id) => w.delete_retry(id).map(|()| Applied::Done),
                    WriteOp::Acked(id, at) => w.put_fate(id, Fate::Acked, *at),
                    WriteOp::DeadLetter(dl) => w.put_dead_letter(dl),
                    WriteOp::Position { source, position } => {
                        put_position(tx, source, *position, now).map(|()| Applied::Done)
                    }
                })
                .collect()
        })
    }

    fn schedule_retries(&self, batch: &[ScheduledRetry]) -> Result<Vec<Applied>> {
        self.write(|tx| {
            let mut w = Writes::new(tx);
            batch.iter().map(|r| w.put_retry_unless_final(r)).collect()
        })
    }

    fn unschedule(&self, ids: &[MessageId]) -> Result<()> {
        self.write(|tx| {
            let mut w = Writes::new(tx);
            ids.iter().try_for_each(|id| w.delete_retry(id))
        })
    }

    fn record_dead_letters(&self, batch: &[DeadLetter]) -> Result<Vec<Applied>> {
        self.write(|tx| {
            let mut w = Writes::new(tx);
            batch.iter().map(|dl| w.put_dead_letter(dl)).collect()
        })
    }

    fn record_acked(&self, ids: &[MessageId], at: Timestamp) -> Result<Vec<Applied>> {
        self.write(|tx| {
            let mut w = Writes::new(tx);
            ids.iter()
                .map(|id| w.put_fate(id, Fate::Acked, at))
                .collect()
        })
    }

    fn scheduled(&self) -> Result<Vec<(MessageId, Timestamp)>> {
        let conn = self.conn();
        // Equal due times come back in the order they were (last) scheduled.
        let mut stmt =
            conn.prepare("SELECT message_id, due_ms FROM retries ORDER BY due_ms, rowid")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        rows.map(|row| {
            let (id, due) = row?;
            Ok((MessageId(id), ts_from_sql("retries", "due_ms", due)?))
        })
        .collect()
    }

    fn retries(&self, ids: &[MessageId]) -> Result<Vec<ScheduledRetry>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {RETRY_COLUMNS} FROM retries WHERE message_id = ?1"
        ))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(raw) = stmt.query_row([&id.0], RawRetry::from_row).optional()? {
                out.push(raw.decode()?);
            }
        }
        Ok(out)
    }

    fn fate_of(&self, id: &MessageId) -> Result<Option<Fate>> {
        let conn = self.conn();
        fate_in(&conn, id)
    }

    fn known_fates(&self, ids: &[MessageId]) -> Result<Vec<(MessageId, Fate)>> {
        let conn = self.conn();
        let mut out = Vec::new();
        for id in ids {
            if let Some(fate) = fate_in(&conn, id)? {
                out.push((id.clone(), fate));
            }
        }
        Ok(out)
    }

    fn prune_acked(&self, before: Timestamp) -> Result<u64> {
        let before = ts_to_sql("before", before)?;
        self.write(|tx| {
            let n = tx.execute("DELETE FROM fates WHERE fate = 1 AND at_ms < ?1", [before])?;
            Ok(n as u64)
        })
    }

    fn dead_letters(&self, f: &DeadLetterFilter) -> Result<Page<StoredDeadLetter, DeadLetterId>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let mut sql = format!("SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters WHERE 1 = 1");
        let mut args: Vec<Value> = Vec::new();
        let mut text = |sql: &mut String, col: &str, v: &Option<String>| {
            if let Some(v) = v {
                sql.push_str(&format!(" AND {col} = ?"));
                args.push(Value::Text(v.clone()));
            }
        };
        text(&mut sql, "label", &f.label);
        text(&mut sql, "biz", &f.biz);
        text(&mut sql, "last_code", &f.code);
        text(&mut sql, "status", &f.status.map(|s| s.as_str().to_owned()));
        if let Some(since) = f.since {
            sql.push_str(" AND last_ms >= ?");
            args.push(Value::Integer(ts_to_sql("since", since)?));
        }
        if let Some(until) = f.until {
            sql.push_str(" AND last_ms < ?");
            args.push(Value::Integer(ts_to_sql("until", until)?));
        }
        if let Some(before) = f.before {
            sql.push_str(" AND id < ?");
            args.push(Value::Integer(before.0));
        }
        sql.push_str(" ORDER BY id DESC LIMIT ?");
        args.push(Value::Integer(limit as i64 + 1));

        let conn = self.conn();
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), RawDeadLetter::from_row)?;
        let mut items = rows
            .map(|r| r.map_err(StoreError::from).and_then(RawDeadLetter::decode))
            .collect::<Result<Vec<_>>>()?;
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|d| d.id)
        } else {
            None
        };
        Ok(Page { items, next })
    }

    fn dead_letter(&self, id: &MessageId) -> Result<Option<StoredDeadLetter>> {
        let conn = self.conn();
        latest_dead_letter(&conn, id)
    }

    fn replay(&self, id: &MessageId, operator: &str, reason: &str) -> Result<ScheduledRetry> {
        let (operator, reason) = (required("operator", operator)?, required("reason", reason)?);
        let now = self.clock.now();
        self.write(|tx| {
            let dl = open_dead_letter(tx, id)?;
            tx.execute(
                "UPDATE dead_letters SET status = 'replayed' WHERE id = ?1",
                [dl.id.0],
            )?;
            // The new fate replaces the old one.
            tx.execute("DELETE FROM fates WHERE message_id = ?1", [&id.0])?;
            let letter = dl.letter;
            let retry = ScheduledRetry {
                due: now,
                meta: RetryMeta {
                    attempt: 0,
                    first_seen: now,
                    last_code: letter.last_code,
                    last_message: letter.last_message,
                    last_delay: Duration::ZERO,
                    rule: letter.rule,
                    rule_set_version: letter.rule_set_version,
                },
                message: letter.message,
            };
            Writes::new(tx).put_retry_unless_final(&retry)?; // its fate was just deleted: written
            put_audit(tx, now, AuditAction::Replay, id, dl.id, operator, reason)?;
            Ok(retry)
        })
    }

    fn skip(&self, id: &MessageId, operator: &str, reason: &str) -> Result<StoredDeadLetter> {
        let (operator, reason) = (required("operator", operator)?, required("reason", reason)?);
        let now = self.clock.now();
        self.write(|tx| {
            let mut dl = open_dead_letter(tx, id)?;
            tx.execute(
                "UPDATE dead_letters SET status = 'skipped' WHERE id = ?1",
                [dl.id.0],
            )?;
            put_audit(tx, now, AuditAction::Skip, id, dl.id, operator, reason)?;
            dl.status = DeadLetterStatus::Skipped;
            Ok(dl)
        })
    }

    fn audit_log(&self, f: &AuditFilter) -> Result<Page<AuditEntry, i64>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, at_ms, action, message_id, dead_letter_id, operator, reason FROM audit_log
             WHERE (?1 IS NULL OR message_id = ?1) AND (?2 IS NULL OR id < ?2)
             ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![
                f.message_id.as_ref().map(|m| &m.0),
                f.before,
                limit as i64 + 1
            ],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            },
        )?;
        let mut items = Vec::new();
        for row in rows {
            let (id, at, action, message_id, dl, operator, reason) = row?;
            let action = match action.as_str() {
                "replay" => AuditAction::Replay,
                "skip" => AuditAction::Skip,
                other => return Err(corrupt("audit_log", "action", other)),
            };
            items.push(AuditEntry {
                id,
                at: ts_from_sql("audit_log", "at_ms", at)?,
                action,
                message_id: MessageId(message_id),
                dead_letter: DeadLetterId(dl),
                operator,
                reason,
            });
        }
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|e| e.id)
        } else {
            None
        };
        Ok(Page { items, next })
    }

    fn commit_position(&self, source: &str, position: u64) -> Result<()> {
        let now = self.clock.now();
        self.write(|tx| put_position(tx, source, position, now))
    }

    fn position(&self, source: &str) -> Result<Option<u64>> {
        let conn = self.conn();
        let pos: Option<i64> = conn
            .query_row(
                "SELECT position FROM positions WHERE source = ?1",
                [source],
                |r| r.get(0),
            )
            .optional()?;
        pos.map(|p| u64::try_from(p).map_err(|_| corrupt("positions", "position", p)))
            .transpose()
    }
}

// ---- writes --------------------------------------------------------------------------------

fn put_position(tx: &Transaction<'_>, source: &str, position: u64, now: Timestamp) -> Result<()> {
    let position = i64::try_from(position).map_err(|_| StoreError::OutOfRange {
        what: "position",
        value: position.into(),
        max: i64::MAX as u64,
    })?;
    tx.prepare_cached(
        "INSERT INTO positions (source, position, at_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (source) DO UPDATE SET position = excluded.position, at_ms = excluded.at_ms",
    )?
    .execute(params![source, position, ts_to_sql("now", now)?])?;
    Ok(())
}

fn put_audit(
    tx: &Transaction<'_>,
    at: Timestamp,
    action: AuditAction,
    id: &MessageId,
    dl: DeadLetterId,
    operator: &str,
    reason: &str,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO audit_log (at_ms, action, message_id, dead_letter_id, operator, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        ts_to_sql("now", at)?,
        action.as_str(),
        id.0,
        dl.0,
        operator,
        reason
    ])?;
    Ok(())
}

// ---- reads ---------------------------------------------------------------------------------

pub(super) fn fate_in(conn: &Connection, id: &MessageId) -> Result<Option<Fate>> {
    let code: Option<i64> = conn
        .prepare_cached("SELECT fate FROM fates WHERE message_id = ?1")?
        .query_row([&id.0], |r| r.get(0))
        .optional()?;
    code.map(|c| match c {
        1 => Ok(Fate::Acked),
        2 => Ok(Fate::DeadLettered),
        other => Err(corrupt("fates", "fate", other)),
    })
    .transpose()
}

fn latest_dead_letter(conn: &Connection, id: &MessageId) -> Result<Option<StoredDeadLetter>> {
    conn.prepare_cached(&format!(
        "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters WHERE message_id = ?1
         ORDER BY id DESC LIMIT 1"
    ))?
    .query_row([&id.0], RawDeadLetter::from_row)
    .optional()?
    .map(RawDeadLetter::decode)
    .transpose()
}

/// The message's open (`dead`) dead letter, or a clear error saying why there is none.
fn open_dead_letter(tx: &Transaction<'_>, id: &MessageId) -> Result<StoredDeadLetter> {
    match latest_dead_letter(tx, id)? {
        None => Err(StoreError::DeadLetterNotFound(id.clone())),
        Some(dl) if dl.status != DeadLetterStatus::Dead => Err(StoreError::AlreadyHandled {
            id: id.clone(),
            status: dl.status,
        }),
        Some(dl) => Ok(dl),
    }
}
