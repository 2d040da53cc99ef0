//! [`Writes`]: the statements of one transaction, and each [`WriteOp`](super::WriteOp) as
//! SQL. Each statement is prepared once per transaction and reused for every write in it,
//! rather than looked up in the connection's statement cache (hashing and comparing its SQL
//! text) write by write: the journal applies thousands per transaction.

use rusqlite::{CachedStatement, Connection, OptionalExtension, Transaction, params};

use super::decisions::{DecisionPage, PACKED, pack};
use super::rows::*;
use super::{
    Applied, AuditAction, DeadLetter, DeadLetterStatus, Fate, MessageId, Offset, OperatorAction,
    Result, ScheduledRetry, StoredDeadLetter,
};
use crate::time::Timestamp;

/// Writes (or replaces) the retry row, unless the message already has a final fate: a retry
/// for an acked or dead-lettered message could later give it a second fate.
const PUT_RETRY_UNLESS_FINAL: &str = concat!(
    "INSERT OR REPLACE INTO retries (",
    retry_columns!(),
    ") SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16 \
     WHERE NOT EXISTS (SELECT 1 FROM fates WHERE message_id = ?1)"
);
const PUT_FATE: &str = "INSERT OR IGNORE INTO fates (message_id, fate, at_ms, source, position) \
     VALUES (?1, ?2, ?3, ?4, ?5)";
const DELETE_RETRY: &str = "DELETE FROM retries WHERE message_id = ?1";
const PUT_DEAD_LETTER: &str = "INSERT INTO dead_letters (message_id, biz, payload, headers, \
     label, reason, last_code, last_message, attempts, first_ms, last_ms, rule, \
     rule_set_version, attrs, failures, redrives, ordering_key, status) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, 'dead')";
const PUT_POSITION: &str = "INSERT INTO positions (source, position, at_ms) VALUES (?1, ?2, ?3)
     ON CONFLICT (source) DO UPDATE SET position = excluded.position, at_ms = excluded.at_ms
     WHERE excluded.position > positions.position";
const PRUNE_ACKED: &str = "DELETE FROM fates WHERE source = ?1 AND position <= ?2 AND fate = 1";
const PRUNE_UNPOSITIONED: &str =
    "DELETE FROM fates WHERE fate = 1 AND source IS NULL AND at_ms < ?1";
/// A page of logged decisions, numbered on from the newest page's `through`, its `floor`
/// what the newest `keep` (`?4`) leaves out (never lower than the newest page's).
const PUT_DECISION_PAGE: &str = "INSERT INTO decision_pages \
     (first_ms, last_ms, count, through, floor, packing, entries) \
     SELECT ?1, ?2, ?3, t + ?3, MAX(f, t + ?3 - ?4), ?5, ?6 FROM (SELECT \
         COALESCE((SELECT through FROM decision_pages ORDER BY seq DESC LIMIT 1), 0) AS t, \
         COALESCE((SELECT floor FROM decision_pages ORDER BY seq DESC LIMIT 1), 0) AS f)";
/// A log of no decision still trims: the newest page's floor rises to what `?1` leaves out.
const RAISE_DECISION_FLOOR: &str = "UPDATE decision_pages SET floor = MAX(floor, through - ?1) \
     WHERE seq = (SELECT MAX(seq) FROM decision_pages)";
/// Drops the pages whose every entry is at or below the floor (a read leaves out the
/// trimmed entries of the page that straddles it).
const TRIM_DECISIONS: &str = "DELETE FROM decision_pages WHERE through <= \
     (SELECT floor FROM decision_pages ORDER BY seq DESC LIMIT 1)";

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
        let row = RetryRow::encode(r)?;
        let written =
            prepared(&mut self.put_retry, self.tx, PUT_RETRY_UNLESS_FINAL)?.execute(params![
                row.id,
                row.biz,
                row.payload,
                row.headers,
                row.due,
                row.attempt,
                row.first_seen,
                row.last_code,
                row.last_message,
                row.last_delay,
                row.rule,
                row.version,
                row.offset,
                row.failures,
                row.redrives,
                row.key,
            ])?;
        if written == 1 {
            return Ok(Applied::Done);
        }
        let fate = fate_in(self.tx, &r.message.id)?
            .ok_or_else(|| corrupt("retries", "message_id", "retry not written, and no fate"))?;
        Ok(Applied::FateAlreadyKnown(fate))
    }

    fn delete_retry(&mut self, id: &MessageId) -> Result<()> {
        prepared(&mut self.delete_retry, self.tx, DELETE_RETRY)?.execute([id.as_str()])?;
        Ok(())
    }

    /// Records `fate` for `id` unless it already has one (first fate wins). Either way the
    /// message is final, so its retry row goes.
    pub(super) fn put_fate(
        &mut self,
        id: &MessageId,
        fate: Fate,
        at: Timestamp,
        offset: Option<&Offset>,
    ) -> Result<Applied> {
        let code = match fate {
            Fate::Acked => 1,
            Fate::DeadLettered => 2,
        };
        let position = offset
            .map(|o| position_to_sql("offset", o.position))
            .transpose()?;
        let inserted = prepared(&mut self.put_fate, self.tx, PUT_FATE)?.execute(params![
            id.as_str(),
            code,
            ts_to_sql("fate time", at)?,
            offset.map(|o| &*o.source),
            position,
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
        let applied = self.put_fate(dl.id(), Fate::DeadLettered, dl.at, None)?;
        if applied != Applied::Done {
            return Ok(applied);
        }
        let row = DeadLetterRow::encode(dl)?;
        prepared(&mut self.put_dead_letter, self.tx, PUT_DEAD_LETTER)?.execute(params![
            row.id,
            row.biz,
            row.payload,
            row.headers,
            row.label,
            row.reason,
            row.last_code,
            row.last_message,
            row.attempts,
            row.first,
            row.last,
            row.rule,
            row.version,
            row.attrs,
            row.failures,
            row.redrives,
            row.key,
        ])?;
        Ok(Applied::Done)
    }

    /// Moves a source's position forward (never back) and prunes the acked fates it covers.
    pub(super) fn put_position(
        &mut self,
        source: &str,
        position: u64,
        at: Timestamp,
    ) -> Result<()> {
        let position = position_to_sql("position", position)?;
        self.tx.prepare_cached(PUT_POSITION)?.execute(params![
            source,
            position,
            ts_to_sql("now", at)?
        ])?;
        let stored: i64 = self
            .tx
            .prepare_cached("SELECT position FROM positions WHERE source = ?1")?
            .query_row([source], |r| r.get(0))?;
        self.tx
            .prepare_cached(PRUNE_ACKED)?
            .execute(params![source, stored])?;
        Ok(())
    }

    /// Forgets the acked fates without an offset recorded before `before`.
    pub(super) fn prune_fates(&mut self, before: Timestamp) -> Result<Applied> {
        self.tx
            .prepare_cached(PRUNE_UNPOSITIONED)?
            .execute([ts_to_sql("before", before)?])?;
        Ok(Applied::Done)
    }

    /// Appends `decisions` to the decision log, in order, and trims it to the newest `keep`.
    pub(super) fn log_decisions(&mut self, decisions: &DecisionPage, keep: u64) -> Result<Applied> {
        // A time beyond what the column holds is the far future, as a due time's is.
        let ms = |t: u64| i64::try_from(t).unwrap_or(i64::MAX);
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        match decisions.span() {
            Some((first, last)) => {
                let count = i64::try_from(decisions.len()).unwrap_or(i64::MAX);
                self.tx.prepare_cached(PUT_DECISION_PAGE)?.execute(params![
                    ms(first),
                    ms(last),
                    count,
                    keep,
                    PACKED,
                    pack(decisions)
                ])?;
            }
            None => {
                self.tx
                    .prepare_cached(RAISE_DECISION_FLOOR)?
                    .execute([keep])?;
            }
        }
        self.tx.prepare_cached(TRIM_DECISIONS)?.execute([])?;
        Ok(Applied::Done)
    }

    /// Replays the message's open dead letter: marked `replayed`, its fate cleared, the message
    /// scheduled as a fresh delivery due at once, the audit log written. A `redrive` replays
    /// only an open (`dead`) letter and counts one more redrive; an operator's replay also
    /// takes an expired one.
    pub(super) fn replay(&mut self, a: &OperatorAction, redrive: bool) -> Result<Applied> {
        let dl = match open_dead_letter(self.tx, &a.id, !redrive)? {
            Ok(dl) => dl,
            Err(refused) => return Ok(refused),
        };
        self.tx.execute(
            "UPDATE dead_letters SET status = 'replayed' WHERE id = ?1",
            [dl.id.0],
        )?;
        // The new fate replaces the old one.
        self.tx
            .execute("DELETE FROM fates WHERE message_id = ?1", [a.id.as_str()])?;
        let retry = replayed_delivery(dl.letter.message, a.at, redrive);
        self.put_retry_unless_final(&retry)?; // its fate was just deleted: written
        put_audit(self.tx, AuditAction::Replay, a, Some(dl.id))?;
        Ok(Applied::Replayed(Box::new(retry)))
    }

    /// Marks the message's open dead letter `skipped` and writes the audit log.
    pub(super) fn skip(&mut self, a: &OperatorAction) -> Result<Applied> {
        let mut dl = match open_dead_letter(self.tx, &a.id, true)? {
            Ok(dl) => dl,
            Err(refused) => return Ok(refused),
        };
        self.tx.execute(
            "UPDATE dead_letters SET status = 'skipped' WHERE id = ?1",
            [dl.id.0],
        )?;
        put_audit(self.tx, AuditAction::Skip, a, Some(dl.id))?;
        dl.status = DeadLetterStatus::Skipped;
        Ok(Applied::Skipped(Box::new(dl)))
    }

    /// Marks the message's open dead letter `expired` and writes the audit log.
    pub(super) fn expire(&mut self, a: &OperatorAction) -> Result<Applied> {
        let dl = match open_dead_letter(self.tx, &a.id, false)? {
            Ok(dl) => dl,
            Err(refused) => return Ok(refused),
        };
        self.tx.execute(
            "UPDATE dead_letters SET status = 'expired' WHERE id = ?1",
            [dl.id.0],
        )?;
        put_audit(self.tx, AuditAction::Expire, a, Some(dl.id))?;
        Ok(Applied::Done)
    }

    /// Moves the message's scheduled retry to the action's time and writes the audit log.
    pub(super) fn retry_now(&mut self, a: &OperatorAction) -> Result<Applied> {
        let moved = self.tx.execute(
            "UPDATE retries SET due_ms = ?2 WHERE message_id = ?1",
            params![a.id.as_str(), ts_to_sql("now", a.at)?],
        )?;
        if moved == 0 {
            return Ok(Applied::NoRetry);
        }
        put_audit(self.tx, AuditAction::RetryNow, a, None)?;
        Ok(Applied::Done)
    }

    /// Writes an audit line naming the message's latest dead letter, if it has one.
    pub(super) fn audit(&mut self, action: AuditAction, a: &OperatorAction) -> Result<Applied> {
        let dl = latest_dead_letter(self.tx, &a.id)?.map(|d| d.id);
        put_audit(self.tx, action, a, dl)?;
        Ok(Applied::Done)
    }
}

fn put_audit(
    tx: &Transaction<'_>,
    action: AuditAction,
    a: &OperatorAction,
    dl: Option<super::DeadLetterId>,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO audit_log (at_ms, action, message_id, dead_letter_id, operator, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        ts_to_sql("now", a.at)?,
        action.as_str(),
        a.id.as_str(),
        dl.map(|d| d.0),
        a.operator,
        a.reason
    ])?;
    Ok(())
}

// ---- reads inside a transaction ------------------------------------------------------------

pub(super) fn fate_in(conn: &Connection, id: &MessageId) -> Result<Option<Fate>> {
    let code: Option<i64> = conn
        .prepare_cached("SELECT fate FROM fates WHERE message_id = ?1")?
        .query_row([id.as_str()], |r| r.get(0))
        .optional()?;
    code.map(|c| match c {
        1 => Ok(Fate::Acked),
        2 => Ok(Fate::DeadLettered),
        other => Err(corrupt("fates", "fate", other)),
    })
    .transpose()
}

pub(super) fn latest_dead_letter(
    conn: &Connection,
    id: &MessageId,
) -> Result<Option<StoredDeadLetter>> {
    conn.prepare_cached(&format!(
        "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters WHERE message_id = ?1
         ORDER BY id DESC LIMIT 1"
    ))?
    .query_row([id.as_str()], RawDeadLetter::from_row)
    .optional()?
    .map(RawDeadLetter::decode)
    .transpose()
}

/// The message's open (`dead`, or with `or_expired` also `expired`) dead letter, or the
/// refusal that says why there is none.
fn open_dead_letter(
    tx: &Transaction<'_>,
    id: &MessageId,
    or_expired: bool,
) -> Result<std::result::Result<StoredDeadLetter, Applied>> {
    Ok(match latest_dead_letter(tx, id)? {
        None => Err(Applied::NoDeadLetter),
        Some(dl) if dl.status.is_actionable(or_expired) => Ok(dl),
        Some(dl) => Err(Applied::AlreadyHandled(dl.status)),
    })
}
