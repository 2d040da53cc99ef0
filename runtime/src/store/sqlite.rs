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

use super::decision_from_json;
use super::decisions::unpack;
use super::rows::*;
use super::schema;
use super::writes::{Writes, fate_in, latest_dead_letter};
use super::{
    Applied, AuditAction, AuditEntry, AuditFilter, DeadLetterFilter, DeadLetterId, DecisionFilter,
    Fate, MAX_PAGE, MessageId, OpenLetters, Page, Result, RetryCursor, RetryFilter, ScheduledRetry,
    Store, StoreError, StoredDeadLetter, WriteOp,
};
use crate::time::Timestamp;
use rebound_engine::release::LoggedDecision;

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
}

impl SqliteStore {
    /// Opens (creating if missing) `rebound.db` in `data_dir` with the default options.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(data_dir, SqliteOptions::default())
    }

    /// Opens (creating if missing) `rebound.db` in `data_dir`, migrating an older schema and
    /// refusing a newer one.
    pub fn open_with(data_dir: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
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
        self.write(|tx| {
            let mut w = Writes::new(tx);
            ops.iter()
                .map(|op| match op {
                    WriteOp::Schedule(r) => w.put_retry_unless_final(r),
                    WriteOp::Acked { id, at, offset } => {
                        w.put_fate(id, Fate::Acked, *at, offset.as_ref())
                    }
                    WriteOp::DeadLetter(dl) => w.put_dead_letter(dl),
                    WriteOp::Position {
                        source,
                        position,
                        at,
                    } => w
                        .put_position(source, *position, *at)
                        .map(|()| Applied::Done),
                    WriteOp::PruneFates { before } => w.prune_fates(*before),
                    WriteOp::Replay(action) => w.replay(action, false),
                    WriteOp::Redrive(action) => w.replay(action, true),
                    WriteOp::Skip(action) => w.skip(action),
                    WriteOp::Expire(action) => w.expire(action),
                    WriteOp::RetryNow(action) => w.retry_now(action),
                    WriteOp::Audit(kind, action) => w.audit(*kind, action),
                    WriteOp::LogDecisions { decisions, keep } => w.log_decisions(decisions, *keep),
                })
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
            Ok((MessageId::from(id), ts_from_sql("retries", "due_ms", due)?))
        })
        .collect()
    }

    fn retries(&self, ids: &[MessageId]) -> Result<Vec<ScheduledRetry>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(concat!(
            "SELECT ",
            retry_columns!(),
            " FROM retries WHERE message_id = ?1"
        ))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(raw) = stmt
                .query_row([id.as_str()], RawRetry::from_row)
                .optional()?
            {
                out.push(raw.decode()?);
            }
        }
        Ok(out)
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

    fn dead_letters(&self, f: &DeadLetterFilter) -> Result<Page<StoredDeadLetter, DeadLetterId>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let (mut sql, mut args) = dead_letter_where(f, &format!("SELECT {DEAD_LETTER_COLUMNS}"))?;
        if let Some(before) = f.before {
            sql.push_str(" AND id < ?");
            args.push(Value::Integer(before.0));
        }
        sql.push_str(" ORDER BY id DESC LIMIT ?");
        args.push(Value::Integer(limit as i64 + 1));

        let conn = self.conn();
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), RawDeadLetter::from_row)?;
        let items = rows
            .map(|r| r.map_err(StoreError::from).and_then(RawDeadLetter::decode))
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_one_more(items, limit, |d| d.id))
    }

    fn dead_letter_count(&self, f: &DeadLetterFilter) -> Result<u64> {
        let (sql, args) = dead_letter_where(f, "SELECT count(*)")?;
        let conn = self.conn();
        let n: i64 = conn.query_row(&sql, rusqlite::params_from_iter(args), |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn open_letters(&self, overdue_before: &[(String, Timestamp)]) -> Result<Vec<OpenLetters>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT label, count(*), min(last_ms) FROM dead_letters WHERE status = 'dead'
             GROUP BY label ORDER BY label",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (label, open, oldest) = row?;
            let overdue = match overdue_before.iter().find(|(l, _)| *l == label) {
                None => 0,
                Some((_, cutoff)) => conn
                    .prepare_cached(
                        "SELECT count(*) FROM dead_letters
                         WHERE status = 'dead' AND label = ?1 AND last_ms < ?2",
                    )?
                    .query_row(params![label, ts_to_sql("cutoff", *cutoff)?], |r| {
                        r.get::<_, i64>(0)
                    })?,
            };
            out.push(OpenLetters {
                label,
                open: u64::try_from(open).unwrap_or(0),
                overdue: u64::try_from(overdue).unwrap_or(0),
                oldest: ts_from_sql("dead_letters", "last_ms", oldest)?,
            });
        }
        Ok(out)
    }

    fn scheduled_retries(&self, f: &RetryFilter) -> Result<Page<ScheduledRetry, RetryCursor>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let mut sql = concat!("SELECT ", retry_columns!(), " FROM retries WHERE 1 = 1").to_owned();
        let mut args: Vec<Value> = Vec::new();
        for (col, v) in [("biz", &f.biz), ("last_code", &f.code), ("rule", &f.rule)] {
            if let Some(v) = v {
                sql.push_str(&format!(" AND {col} = ?"));
                args.push(Value::Text(v.clone()));
            }
        }
        if let Some(after) = &f.after {
            sql.push_str(" AND (due_ms > ? OR (due_ms = ? AND message_id > ?))");
            let due = ts_to_sql("after", after.due)?;
            args.push(Value::Integer(due));
            args.push(Value::Integer(due));
            args.push(Value::Text(after.id.as_str().to_owned()));
        }
        sql.push_str(" ORDER BY due_ms, message_id LIMIT ?");
        args.push(Value::Integer(limit as i64 + 1));
        let conn = self.conn();
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), RawRetry::from_row)?;
        let items = rows
            .map(|r| r.map_err(StoreError::from).and_then(RawRetry::decode))
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_one_more(items, limit, |r| RetryCursor {
            due: r.due,
            id: r.message.id.clone(),
        }))
    }

    fn dead_letter(&self, id: &MessageId) -> Result<Option<StoredDeadLetter>> {
        let conn = self.conn();
        latest_dead_letter(&conn, id)
    }

    fn audit_log(&self, f: &AuditFilter) -> Result<Page<AuditEntry, i64>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, at_ms, action, message_id, dead_letter_id, operator, reason FROM audit_log
             WHERE (?1 IS NULL OR message_id = ?1) AND (?2 IS NULL OR id < ?2)
               AND (?4 IS NULL OR operator = ?4) AND (?5 IS NULL OR action = ?5)
               AND (?6 IS NULL OR at_ms >= ?6) AND (?7 IS NULL OR at_ms < ?7)
             ORDER BY id DESC LIMIT ?3",
        )?;
        let since = f.since.map(|t| ts_to_sql("since", t)).transpose()?;
        let until = f.until.map(|t| ts_to_sql("until", t)).transpose()?;
        let rows = stmt.query_map(
            params![
                f.message_id.as_ref().map(MessageId::as_str),
                f.before,
                limit as i64 + 1,
                f.operator,
                f.action.map(AuditAction::as_str),
                since,
                until,
            ],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            },
        )?;
        let mut items = Vec::new();
        for row in rows {
            let (id, at, action, message_id, dl, operator, reason) = row?;
            let action = AuditAction::parse(&action)
                .ok_or_else(|| corrupt("audit_log", "action", &action))?;
            items.push(AuditEntry {
                id,
                at: ts_from_sql("audit_log", "at_ms", at)?,
                action,
                message_id: MessageId::from(message_id),
                dead_letter: dl.map(DeadLetterId),
                operator,
                reason,
            });
        }
        Ok(Page::from_one_more(items, limit, |e| e.id))
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

    fn decisions(&self, f: &DecisionFilter) -> Result<Vec<LoggedDecision>> {
        let since = f
            .since
            .map_or(0, |t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX));
        let limit = f.limit.unwrap_or(usize::MAX);
        // The pages under the connection's lock, newest first until they hold the limit;
        // unpacked and parsed once it is released, so the journal's commits wait for the
        // read of the rows only, not for the JSON of the whole log.
        let pages = {
            let conn = self.conn();
            // Entries numbered up to the newest page's floor are trimmed.
            let floor: i64 = conn
                .query_row(
                    "SELECT floor FROM decision_pages ORDER BY seq DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?
                .unwrap_or(0);
            let mut stmt = conn.prepare_cached(
                "SELECT seq, count, through, first_ms, packing, entries FROM decision_pages \
                 WHERE last_ms >= ?1 ORDER BY seq DESC",
            )?;
            let mut rows = stmt.query([since])?;
            let mut pages: Vec<(i64, i64, i64, Vec<u8>)> = Vec::new();
            // Entries known to pass `since` (a page that starts before it may hold fewer).
            let mut held = 0usize;
            while held < limit {
                let Some(row) = rows.next()? else { break };
                let (seq, count, through, first): (i64, i64, i64, i64) =
                    (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
                // How many of its entries are inside the trim: its last `inside`.
                let inside = count.min(through.saturating_sub(floor)).max(0);
                if inside == 0 {
                    break; // it and every older page are outside
                }
                if first >= since {
                    held = held.saturating_add(usize::try_from(inside).unwrap_or(usize::MAX));
                }
                pages.push((seq, inside, row.get(4)?, row.get(5)?));
            }
            pages
        };
        let location = self.location();
        let mut newest_first = Vec::new();
        'pages: for (seq, inside, packing, entries) in pages {
            let text = match unpack(packing, entries) {
                Ok(text) => text,
                Err(e) => {
                    // One bad page never fails a read of the log.
                    tracing::warn!(store = %location, page = seq, error = %e,
                        "skipping a decision log page that does not read");
                    continue;
                }
            };
            let lines = text
                .lines()
                .rev()
                .take(usize::try_from(inside).unwrap_or(0));
            for (i, line) in lines.enumerate() {
                let Some(d) =
                    decision_from_json(&location, format_args!("{seq}.{i}"), line.as_bytes())
                else {
                    continue;
                };
                if f.matches(&d) {
                    newest_first.push(d);
                    if newest_first.len() == limit {
                        break 'pages;
                    }
                }
            }
        }
        newest_first.reverse();
        Ok(newest_first)
    }
}

/// `select` from the dead letters that pass `f` (its paging aside): the SQL, ending in a
/// `WHERE` clause more conditions can be added to, and its arguments.
fn dead_letter_where(f: &DeadLetterFilter, select: &str) -> Result<(String, Vec<Value>)> {
    let mut sql = format!("{select} FROM dead_letters WHERE 1 = 1");
    let mut args: Vec<Value> = Vec::new();
    let status = f.status.map(|s| s.as_str().to_owned());
    let message_id = f.message_id.as_ref().map(|m| m.as_str().to_owned());
    for (col, v) in [
        ("label", &f.label),
        ("biz", &f.biz),
        ("last_code", &f.code),
        ("rule", &f.rule),
        ("message_id", &message_id),
        ("status", &status),
    ] {
        if let Some(v) = v {
            sql.push_str(&format!(" AND {col} = ?"));
            args.push(Value::Text(v.clone()));
        }
    }
    if let Some(since) = f.since {
        sql.push_str(" AND last_ms >= ?");
        args.push(Value::Integer(ts_to_sql("since", since)?));
    }
    if let Some(until) = f.until {
        sql.push_str(" AND last_ms < ?");
        args.push(Value::Integer(ts_to_sql("until", until)?));
    }
    if let Some(slas) = &f.overdue {
        sql.push_str(" AND status = 'dead' AND (0 = 1");
        for (label, cutoff) in slas {
            sql.push_str(" OR (label = ? AND last_ms < ?)");
            args.push(Value::Text(label.clone()));
            args.push(Value::Integer(ts_to_sql("overdue", *cutoff)?));
        }
        sql.push(')');
    }
    if let Some(q) = &f.q {
        // instr, not LIKE: the text is matched as it is, `%` and `_` included.
        sql.push_str(" AND (instr(message_id, ?) > 0 OR instr(last_message, ?) > 0)");
        args.push(Value::Text(q.clone()));
        args.push(Value::Text(q.clone()));
    }
    Ok((sql, args))
}
