//! [`Store`] for [`RedisStore`]: every write is one `apply.lua` call (per
//! [`OPS_PER_CALL`](wire::OPS_PER_CALL) ops, or
//! [`DECISIONS_PER_CALL`](wire::DECISIONS_PER_CALL) logged decisions), and the reads are plain
//! commands, pipelined.
//!
//! - **Atomic per call, ordered per batch.** A call is atomic on the server (a script runs
//!   alone), and the whole batch is encoded, and so checked, before the first call. A batch
//!   larger than one call is several calls in order; if one fails, the ones before it stand,
//!   and the journal applies the whole batch again, which every op is safe for.
//! - **`scheduled()` lists the due set**: the retries waiting, due order, equal due times in
//!   scheduling order (the row's `seq`). A retry in flight (claimed by a node, its lease
//!   running) is that node's until its fate or its reap, so it is not listed: a node that
//!   recovers from the store must not take another node's claims. [`Store::retries`] reads
//!   any row, due or in flight. With no claims (one node), every row is due, and
//!   `scheduled()` answers as SQLite's.
//! - Reads are not one snapshot: the fleet writes meanwhile, and a row that goes between two
//!   round trips of one read is left out.
//! - **The decision log is a list** (`{NS}:decisions`, entries numbered by the script), read
//!   newest first with `LRANGE` in chunks from the end: the fleet's trims do not shift what is
//!   left to read, and an entry its appends shift into a later chunk is known by its number
//!   and read once.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::RedisStore;
use super::wire::{self, Args, Fields, corrupt};
use rebound_engine::release::LoggedDecision;
use rebound_runtime::store::fields::{int_field, text_field};
use rebound_runtime::store::{
    Applied, AuditAction, AuditEntry, AuditFilter, DeadLetterFilter, DeadLetterId,
    DeadLetterStatus, DecisionFilter, Fate, MAX_PAGE, MessageId, OpenLetters, Page, Result,
    RetryCursor, RetryFilter, ScheduledRetry, Store, StoredDeadLetter, WriteOp, decision_from_json,
};
use rebound_runtime::time::Timestamp;

static APPLY: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/apply.lua")));

/// Keys per pipelined read.
const READ_CHUNK: usize = 1000;

/// Decision log entries per `LRANGE` (a few MB a reply).
const DECISIONS_CHUNK: usize = 5000;

impl RedisStore {
    /// One `apply.lua` call (with the custody stream's key as `KEYS[2]`, when there is one).
    fn apply_call(&self, args: Args) -> Result<Vec<Value>> {
        let mut call = APPLY.prepare_invoke();
        call.key(self.keys.prefix());
        if let Some(custody) = self.custody.get() {
            call.key(&custody.stream);
        }
        for arg in args {
            call.arg(arg);
        }
        self.io.run("apply", move |mut c| async move {
            call.invoke_async::<Vec<Value>>(&mut c).await
        })
    }

    /// One command per key of `keys`, pipelined in chunks; the replies in order.
    fn each(&self, op: &'static str, cmd: &'static str, keys: Vec<String>) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(READ_CHUNK) {
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.cmd(cmd).arg(key);
            }
            let replies: Vec<Value> =
                self.io.run(
                    op,
                    move |mut c| async move { pipe.query_async(&mut c).await },
                )?;
            out.extend(replies);
        }
        Ok(out)
    }

    /// The newest members of the sorted set `key` below `before` (scores are ids), up to
    /// `count`.
    fn newest(
        &self,
        op: &'static str,
        key: String,
        before: Option<i64>,
        count: usize,
    ) -> Result<Vec<i64>> {
        let max = before.map_or_else(|| "+inf".to_owned(), |b| format!("({b}"));
        self.io.run(op, move |mut c| async move {
            redis::cmd("ZRANGE")
                .arg(key)
                .arg(max)
                .arg("-inf")
                .arg("BYSCORE")
                .arg("REV")
                .arg("LIMIT")
                .arg(0)
                .arg(count)
                .query_async(&mut c)
                .await
        })
    }

    /// Every dead letter, newest first, a chunk at a time, handed to `each` until it says
    /// stop (false).
    fn scan_letters(&self, mut each: impl FnMut(StoredDeadLetter) -> bool) -> Result<()> {
        let mut before = None;
        loop {
            let ids = self.newest("dead letters", self.keys.dead_letters(), before, READ_CHUNK)?;
            let Some(&last) = ids.last() else {
                return Ok(());
            };
            for d in self.letters(&ids)? {
                if !each(d) {
                    return Ok(());
                }
            }
            if ids.len() < READ_CHUNK {
                return Ok(());
            }
            before = Some(last);
        }
    }

    /// Dead letters `ids`, decoded; an id in the index without its hash is corrupt.
    fn letters(&self, ids: &[i64]) -> Result<Vec<StoredDeadLetter>> {
        let keys = ids.iter().map(|n| self.keys.dead_letter(*n)).collect();
        let replies = self.each("dead letters", "HGETALL", keys)?;
        ids.iter()
            .zip(replies)
            .map(|(n, reply)| {
                let fields = Fields::from_value(reply)?;
                if fields.is_empty() {
                    return Err(corrupt(
                        "dead_letters",
                        "index",
                        format!("dead letter {n} is missing"),
                    ));
                }
                wire::dead_letter(*n, &fields)
            })
            .collect()
    }
}

impl Store for RedisStore {
    fn location(&self) -> String {
        self.io.location().to_owned()
    }

    fn apply(&self, ops: &[WriteOp]) -> Result<Vec<Applied>> {
        // Encode every call first: a value the store cannot hold fails the batch unsent.
        let calls = wire::calls(ops)
            .into_iter()
            .map(|call| {
                let mut args = Args::with_capacity(call.len() * 8);
                call.iter()
                    .try_for_each(|(_, op)| wire::encode_op(op, self.offsets.get(), &mut args))?;
                if let Some(custody) = self.custody.get() {
                    wire::encode_custody(custody, call.iter().map(|(_, op)| &**op), &mut args);
                }
                let answering: Vec<usize> = call.iter().map(|(i, _)| *i).collect();
                Ok((answering, args))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut applied: Vec<Option<Applied>> = vec![None; ops.len()];
        for (answering, args) in calls {
            let answers = self.apply_call(args)?;
            if answers.len() != answering.len() {
                return Err(wire::bad_reply(format!(
                    "{} answers to {} ops",
                    answers.len(),
                    answering.len()
                )));
            }
            // A log split over several calls answers once per call: the last one stands.
            for (i, answer) in answering.into_iter().zip(answers) {
                applied[i] = Some(wire::applied(answer)?);
            }
        }
        applied
            .into_iter()
            .map(|a| a.ok_or_else(|| wire::bad_reply("an op with no answer")))
            .collect()
    }

    fn scheduled(&self) -> Result<Vec<(MessageId, Timestamp)>> {
        let due = self.keys.due();
        let entries: Vec<(String, f64)> = self.io.run("scheduled", move |mut c| async move {
            redis::cmd("ZRANGE")
                .arg(due)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(&mut c)
                .await
        })?;
        // Equal due times in scheduling order: each row's `seq`.
        let mut seqs = Vec::with_capacity(entries.len());
        for chunk in entries.chunks(READ_CHUNK) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                pipe.cmd("HGET").arg(self.keys.retry(id)).arg("seq");
            }
            let replies: Vec<Option<i64>> = self.io.run("scheduled", move |mut c| async move {
                pipe.query_async(&mut c).await
            })?;
            seqs.extend(replies);
        }
        let mut out: Vec<(u64, i64, MessageId)> = entries
            .into_iter()
            .zip(seqs)
            .filter_map(|((id, due), seq)| Some((due as u64, seq?, MessageId::from(id))))
            .collect();
        out.sort_unstable_by_key(|(due, seq, _)| (*due, *seq));
        Ok(out
            .into_iter()
            .map(|(due, _, id)| (id, Timestamp::from_millis(due)))
            .collect())
    }

    fn retries(&self, ids: &[MessageId]) -> Result<Vec<ScheduledRetry>> {
        let keys = ids.iter().map(|id| self.keys.retry(id.as_str())).collect();
        let mut out = Vec::new();
        for reply in self.each("retries", "HGETALL", keys)? {
            let fields = Fields::from_value(reply)?;
            if !fields.is_empty() {
                out.push(wire::retry(&fields)?);
            }
        }
        Ok(out)
    }

    fn known_fates(&self, ids: &[MessageId]) -> Result<Vec<(MessageId, Fate)>> {
        let keys = ids.iter().map(|id| self.keys.fate(id.as_str())).collect();
        let replies = self.each("known fates", "GET", keys)?;
        let mut out = Vec::new();
        for (id, reply) in ids.iter().zip(replies) {
            if reply != Value::Nil {
                out.push((id.clone(), wire::fate(Some(reply))?));
            }
        }
        Ok(out)
    }

    fn dead_letters(&self, f: &DeadLetterFilter) -> Result<Page<StoredDeadLetter, DeadLetterId>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let matches = |d: &StoredDeadLetter| f.matches(d);
        // Newest first through the index, a chunk at a time, until a page and one more match.
        let chunk = (limit + 1).max(100);
        let mut before = f.before.map(|b| b.0);
        let mut items = Vec::new();
        while items.len() <= limit {
            let ids = self.newest("dead letters", self.keys.dead_letters(), before, chunk)?;
            let Some(&last) = ids.last() else { break };
            items.extend(self.letters(&ids)?.into_iter().filter(|d| matches(d)));
            before = Some(last);
            if ids.len() < chunk {
                break;
            }
        }
        Ok(Page::from_one_more(items, limit, |d| d.id))
    }

    fn dead_letter_count(&self, f: &DeadLetterFilter) -> Result<u64> {
        let mut n = 0;
        self.scan_letters(|d| {
            n += u64::from(f.matches(&d));
            true
        })?;
        Ok(n)
    }

    fn open_letters(&self, overdue_before: &[(String, Timestamp)]) -> Result<Vec<OpenLetters>> {
        let mut by_label: std::collections::BTreeMap<String, OpenLetters> = Default::default();
        self.scan_letters(|d| {
            if d.status == DeadLetterStatus::Dead {
                let label = d.letter.label.as_str();
                let cutoff = overdue_before.iter().find(|(l, _)| l == label);
                let e = by_label
                    .entry(label.to_owned())
                    .or_insert_with(|| OpenLetters {
                        label: label.to_owned(),
                        open: 0,
                        overdue: 0,
                        oldest: d.letter.at,
                    });
                e.open += 1;
                e.overdue += u64::from(cutoff.is_some_and(|(_, c)| d.letter.at < *c));
                e.oldest = e.oldest.min(d.letter.at);
            }
            true
        })?;
        Ok(by_label.into_values().collect())
    }

    fn scheduled_retries(&self, f: &RetryFilter) -> Result<Page<ScheduledRetry, RetryCursor>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let key = self.keys.due();
        let from = f.after.as_ref().map_or(0, |a| a.due.as_millis());
        // The ids and due times from the cursor's due time on (no payloads), in the page's
        // order (due, then id); then the rows a chunk at a time until a page and one more.
        let entries: Vec<(String, f64)> =
            self.io.run("scheduled retries", move |mut c| async move {
                redis::cmd("ZRANGE")
                    .arg(key)
                    .arg(from)
                    .arg("+inf")
                    .arg("BYSCORE")
                    .arg("WITHSCORES")
                    .query_async(&mut c)
                    .await
            })?;
        let mut order: Vec<RetryCursor> = entries
            .into_iter()
            .map(|(id, due)| RetryCursor {
                due: Timestamp::from_millis(due as u64),
                id: MessageId::from(id),
            })
            .filter(|c| f.after.as_ref().is_none_or(|a| c > a))
            .collect();
        order.sort_unstable();
        let mut items = Vec::new();
        for chunk in order.chunks(READ_CHUNK) {
            let ids: Vec<MessageId> = chunk.iter().map(|c| c.id.clone()).collect();
            let mut rows = self.retries(&ids)?;
            rows.sort_by(|a, b| (a.due, &a.message.id).cmp(&(b.due, &b.message.id)));
            items.extend(rows.into_iter().filter(|r| f.matches(r)));
            if items.len() > limit {
                break;
            }
        }
        Ok(Page::from_one_more(items, limit, |r| RetryCursor {
            due: r.due,
            id: r.message.id.clone(),
        }))
    }

    fn dead_letter(&self, id: &MessageId) -> Result<Option<StoredDeadLetter>> {
        let key = self.keys.last_dead_letter(id.as_str());
        let n: Option<i64> = self.io.run("dead letter", move |mut c| async move {
            redis::cmd("GET").arg(key).query_async(&mut c).await
        })?;
        match n {
            None => Ok(None),
            Some(n) => Ok(self.letters(&[n])?.pop()),
        }
    }

    fn audit_log(&self, f: &AuditFilter) -> Result<Page<AuditEntry, i64>> {
        let limit = f.limit.clamp(1, MAX_PAGE);
        let index = self
            .keys
            .audit(f.message_id.as_ref().map(MessageId::as_str));
        // Newest first through the index, a chunk at a time, until a page and one more match.
        let chunk = (limit + 1).max(100);
        let mut before = f.before;
        let mut items = Vec::new();
        while items.len() <= limit {
            let ids = self.newest("audit log", index.clone(), before, chunk)?;
            let Some(&last) = ids.last() else { break };
            let keys = ids.iter().map(|n| self.keys.audit_line(*n)).collect();
            let replies = self.each("audit log", "HGETALL", keys)?;
            for (n, reply) in ids.iter().zip(replies) {
                let entry = audit_entry(*n, &Fields::from_value(reply)?)?;
                if f.matches(&entry) {
                    items.push(entry);
                }
            }
            before = Some(last);
            if ids.len() < chunk {
                break;
            }
        }
        Ok(Page::from_one_more(items, limit, |e| e.id))
    }

    fn decisions(&self, f: &DecisionFilter) -> Result<Vec<LoggedDecision>> {
        // Newest first from the list's end, a chunk at a time by negative index: a trim (from
        // the head) shifts nothing there, and an append shifts what is left to read further
        // from the end, so the next chunk begins with entries read already, numbered at or
        // above the last one read, and skipped. `at` is checked before the entry is parsed.
        let limit = f.limit.unwrap_or(usize::MAX);
        let location = self.location();
        let mut out = Vec::new();
        let mut lowest = u64::MAX;
        let mut from_end = 0usize;
        while out.len() < limit {
            let key = self.keys.decisions();
            // Without `since`, each entry read is one returned (appends aside): no more.
            let want = match f.since {
                None => DECISIONS_CHUNK.min(limit - out.len()),
                Some(_) => DECISIONS_CHUNK,
            };
            let (start, stop) = (-((from_end + want) as i64), -(from_end as i64) - 1);
            let entries: Vec<Vec<u8>> = self.io.run("decisions", move |mut c| async move {
                redis::cmd("LRANGE")
                    .arg(key)
                    .arg(start)
                    .arg(stop)
                    .query_async(&mut c)
                    .await
            })?;
            // Only the chunk's newest entries can be ones read already (one LRANGE is one
            // slice of the list): past the first new one, every entry is taken.
            let mut overlap = true;
            for entry in entries.iter().rev() {
                let Some((seq, at, text)) = log_entry(entry) else {
                    tracing::warn!(store = %location,
                        "skipping a decision log entry without its number and time");
                    continue;
                };
                if overlap && seq >= lowest {
                    continue;
                }
                overlap = false;
                lowest = seq;
                if f.admits(at) && out.len() < limit {
                    out.extend(decision_from_json(&location, seq, text));
                }
            }
            if entries.len() < want {
                break;
            }
            from_end += want;
        }
        out.reverse();
        Ok(out)
    }

    fn position(&self, source: &str) -> Result<Option<u64>> {
        let key = self.keys.positions();
        let source = source.to_owned();
        let stored: Option<String> = self.io.run("position", move |mut c| async move {
            redis::cmd("HGET")
                .arg(key)
                .arg(source)
                .query_async(&mut c)
                .await
        })?;
        stored
            .map(|p| p.parse().map_err(|_| corrupt("positions", "position", p)))
            .transpose()
    }
}

/// A decision log entry as `apply.lua` writes it, `SEQ AT JSON`: its number, its time and its
/// JSON.
fn log_entry(entry: &[u8]) -> Option<(u64, u64, &[u8])> {
    let number = |bytes: &[u8]| std::str::from_utf8(bytes).ok()?.parse::<u64>().ok();
    let mut parts = entry.splitn(3, |b| *b == b' ');
    let seq = number(parts.next()?)?;
    let at = number(parts.next()?)?;
    Some((seq, at, parts.next()?))
}

/// Audit line `n` from its fields (as `apply.lua` writes them).
fn audit_entry(n: i64, fields: &Fields) -> Result<AuditEntry> {
    const T: &str = "audit_log";
    let text = |name| text_field(T, name, fields.get(name));
    let int = |name| int_field(T, name, fields.get(name));
    let action = text("action")?;
    let action = AuditAction::parse(&action).ok_or_else(|| corrupt(T, "action", &action))?;
    Ok(AuditEntry {
        id: n,
        at: u64::try_from(int("at_ms")?)
            .map(Timestamp::from_millis)
            .map_err(|_| corrupt(T, "at_ms", "negative"))?,
        action,
        message_id: MessageId::from(text("message_id")?),
        dead_letter: match fields.get("dead_letter_id") {
            None => None,
            Some(_) => Some(DeadLetterId(int("dead_letter_id")?)),
        },
        operator: text("operator")?,
        reason: text("reason")?,
    })
}
