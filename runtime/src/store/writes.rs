//! The writes every transaction repeats: a retry scheduled, a fate recorded, a retry row
//! dropped, a dead letter stored. Each statement is prepared once per transaction and reused
//! for every write in it, rather than looked up in the connection's statement cache (hashing
//! and comparing its SQL text) write by write: the journal applies thousands per transaction.

use rusqlite::{CachedStatement, Transaction, params};

use super::rows::*;
use super::sqlite::fate_in;
use super::{Applied, DeadLetter, Fate, MessageId, Result, ScheduledRetry};
use crate::clock::Timestamp;

/// The columns of a retry row, in the order rows are written and read.
macro_rules! retry_columns {
    () => {
        "message_id, biz, payload, headers, due_ms, attempt, first_seen_ms, last_code, \
         last_message, last_delay_ms, rule, rule_set_version"
    };
}
pub(super) const RETRY_COLUMNS: &str = retry_columns!();

/// Writes (or replaces) the retry row, unless the message already has a final fate: a retry
/// for an acked or dead-lettered message could later give it a second fate.
const PUT_RETRY_UNLESS_FINAL: &str = concat!(
    "INSERT OR REPLACE INTO retries (",
    retry_columns!(),
    ") SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12 \
     WHERE NOT EXISTS (SELECT 1 FROM fates WHERE message_id = ?1)"
);
const PUT_FATE: &str = "INSERT OR IGNORE INTO fates (message_id, fate, at_ms) VALUES (?1, ?2, ?3)";
const DELETE_RETRY: &str = "DELETE FROM retries WHERE message_id = ?1";
const PUT_DEAD_LETTER: &str = "INSERT INTO dead_letters (message_id, biz, payload, headers, \
     label, reason, last_code, last_message, attempts, first_ms, last_ms, rule, \
     rule_set_version, status) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'dead')";

/// The write statements of one transaction, each prepared on first use.
pub(super) struct Writes<'t, 'c> {
    tx: &'t Transaction<'c>,
    put_retry: Option<CachedStatement<'t>>,
    put_fate: Option<CachedStatement<'t>>,
    delete_retry: Option<CachedStatement<'t>>,
    put_dead_letter: Option<CachedStatement<'t>>,
}

/// The statement in `slot`, prepared from `sql` the first time.
fn prepared<'s, 't>(
    slot: &'s mut Option<CachedStatement<'t>>,
    tx: &'t Transaction<'_>,
    sql: &str,
) -> Result<&'s mut CachedStatement<'t>> {
    if slot.is_none() {
        *slot = Some(tx.prepare_cached(sql)?);
    }
    Ok(slot.as_mut().expect("prepared just now"))
}

impl<'t, 'c> Writes<'t, 'c> {
    pub(super) fn new(tx: &'t Transaction<'c>) -> Self {
        Writes {
            tx,
            put_retry: None,
            put_fate: None,
            delete_retry: None,
            put_dead_letter: None,
        }
    }

    /// Schedules a retry unless the message already has a final fate.
    pub(super) fn put_retry_unless_final(&mut self, r: &ScheduledRetry) -> Result<Applied> {
        let written =
            prepared(&mut self.put_retry, self.tx, PUT_RETRY_UNLESS_FINAL)?.execute(params![
                r.message.id.0,
                r.message.biz,
                r.message.payload,
                headers_to_sql(&r.message.headers)?,
                ts_to_sql("due", r.due)?,
                r.meta.attempt,
                ts_to_sql("first_seen", r.meta.first_seen)?,
                r.meta.last_code,
                r.meta.last_message,
                duration_to_sql("last_delay", r.meta.last_delay)?,
                r.meta.rule.0,
                r.meta.rule_set_version.0,
            ])?;
        if written == 1 {
            return Ok(Applied::Done);
        }
        let fate = fate_in(self.tx, &r.message.id)?
            .ok_or_else(|| corrupt("retries", "message_id", "retry not written, and no fate"))?;
        Ok(Applied::FateAlreadyKnown(fate))
    }

    /// Drops the message's retry row, if any.
    pub(super) fn delete_retry(&mut self, id: &MessageId) -> Result<()> {
        prepared(&mut self.delete_retry, self.tx, DELETE_RETRY)?.execute([&id.0])?;
        Ok(())
    }

    /// Records `fate` for `id` unless it already has one (first fate wins). Either way the
    /// message is final, so its retry row goes.
    pub(super) fn put_fate(
        &mut self,
        id: &MessageId,
        fate: Fate,
        at: Timestamp,
    ) -> Result<Applied> {
        let code = match fate {
            Fate::Acked => 1,
            Fate::DeadLettered => 2,
        };
        let inserted = prepared(&mut self.put_fate, self.tx, PUT_FATE)?.execute(params![
            id.0,
            code,
            ts_to_sql("fate time", at)?
        ])?;
        self.delete_retry(id)?;
        if inserted == 1 {
            return Ok(Applied::Done);
        }
        let known = fate_in(self.tx, id)?
            .ok_or_else(|| corrupt("fates", "fate", "missing after insert"))?;
        Ok(Applied::FateAlreadyKnown(known))
    }

    /// Stores a dead letter and its fate, unless the message already has a fate.
    pub(super) fn put_dead_letter(&mut self, dl: &DeadLetter) -> Result<Applied> {
        let applied = self.put_fate(&dl.message.id, Fate::DeadLettered, dl.last_time)?;
        if applied != Applied::Done {
            return Ok(applied);
        }
        prepared(&mut self.put_dead_letter, self.tx, PUT_DEAD_LETTER)?.execute(params![
            dl.message.id.0,
            dl.message.biz,
            dl.message.payload,
            headers_to_sql(&dl.message.headers)?,
            dl.label,
            dl.reason,
            dl.last_code,
            dl.last_message,
            dl.attempts,
            ts_to_sql("first_time", dl.first_time)?,
            ts_to_sql("last_time", dl.last_time)?,
            dl.rule.0,
            dl.rule_set_version.0,
        ])?;
        Ok(Applied::Done)
    }
}
