//! The records and ops the cases write, and the reads they compare.

use std::time::Duration;

use crate::fate::{GiveUpReason, Label, RuleRef, Version};
use crate::scheduler::RetryScheduler;
use crate::store::*;
use crate::time::Timestamp;
use crate::topology::{Failure, FailureRecord};
use rebound_engine::release::{Arm, LoggedContext, LoggedDecision, Outcome};

// ---- records and ops ---------------------------------------------------------------------

pub fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

pub fn mid(s: &str) -> MessageId {
    MessageId::from(s)
}

/// The version every record here was decided by.
pub fn v1() -> Version {
    Version::from_hash(0x00c0_ffee_0000_0001)
}

/// A new message, never delivered.
pub fn message(id: &str, biz: &str) -> Message {
    Message::new(id, biz, format!("{{\"order\":\"{id}\"}}")).with_header("trace", format!("t-{id}"))
}

/// A message failed twice and due again at `due`. (A store keeps the last failure's time as
/// `due - delay`, the moment the retry was decided: so is it made here.)
pub fn retry(id: &str, due: u64) -> ScheduledRetry {
    let delay = Duration::from_millis(2_000);
    let mut message = message(id, "ORDER");
    message.retry.attempt = 2;
    message.retry.first_delivery = Some(ms(500_000));
    message.retry.failures.push(FailureRecord {
        attempt: 2,
        code: "DB_LOCK_WAIT".into(),
        message: "lock wait".into(),
        attrs: [("table".to_owned(), "orders".to_owned())].into(),
        at: ms(due).saturating_sub(delay),
        delay: Some(delay),
        rule: RuleRef::Rule("db-lock".into()),
        version: v1(),
    });
    ScheduledRetry::new(message, ms(due))
}

/// A dead letter as a store reads it back: its message without an offset, its failure
/// without `retry_after`, and with attrs.
pub fn letter(id: &str, biz: &str, label: &str, code: &str, at: u64) -> DeadLetter {
    let mut message = message(id, biz);
    message.retry.attempt = 4;
    message.retry.first_delivery = Some(ms(at.saturating_sub(100)));
    DeadLetter {
        message,
        failure: Failure::new(code, format!("{code} again")).with_attr("http_status", "503"),
        label: Label::from(label),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("some-rule".into()),
        version: v1(),
        at: ms(at),
    }
}

pub fn schedule(r: ScheduledRetry) -> WriteOp {
    WriteOp::Schedule(r)
}

/// An acked fate without an offset (its source commits no position).
pub fn acked(id: &str, at: u64) -> WriteOp {
    WriteOp::Acked {
        id: mid(id),
        at: ms(at),
        offset: None,
    }
}

/// An acked fate of the message at `position` of `source`.
pub fn acked_at(id: &str, at: u64, source: &str, position: u64) -> WriteOp {
    WriteOp::Acked {
        id: mid(id),
        at: ms(at),
        offset: Some(Offset {
            source: source.into(),
            position,
        }),
    }
}

pub fn dead(d: DeadLetter) -> WriteOp {
    WriteOp::DeadLetter(Box::new(d))
}

pub fn position(source: &str, position: u64, at: u64) -> WriteOp {
    WriteOp::Position {
        source: source.into(),
        position,
        at: ms(at),
    }
}

pub fn action(id: &str, operator: &str, reason: &str, at: u64) -> OperatorAction {
    OperatorAction::new(mid(id), operator, reason, ms(at)).unwrap()
}

/// A logged decision of message `id` at `now_ms`, its whole context set (attrs, headers,
/// signals, a retry-after, the seed), decided by a canary arm: every field a store must keep.
/// An even `now_ms` is a retry, an odd one a dead letter.
pub fn logged(id: &str, now_ms: u64) -> LoggedDecision {
    let outcome = if now_ms.is_multiple_of(2) {
        Outcome {
            action: "retry".into(),
            delay_ms: Some(1_500),
            label: None,
            reason: None,
            rule: "db-lock".into(),
            version: "00c0ffee00000001".into(),
        }
    } else {
        Outcome {
            action: "dead_letter".into(),
            delay_ms: None,
            label: Some("L2".into()),
            reason: Some("max_retries".into()),
            rule: "defaults".into(),
            version: "00c0ffee00000001".into(),
        }
    };
    LoggedDecision {
        id: id.into(),
        context: LoggedContext {
            biz: "PAYMENT".into(),
            code: "DB_LOCK_WAIT".into(),
            attempt: 3,
            redrives: 1,
            elapsed_ms: 4_200,
            retry_after_ms: Some(750),
            last_delay_ms: 1_000,
            attrs: [
                ("http_status".into(), "503".into()),
                ("shard".into(), "é7".into()),
            ]
            .into(),
            headers: [("trace".into(), format!("t-{id}"))].into(),
            now_ms,
            signals: [
                ("fail_rate".into(), 0.125),
                ("retry_queue_depth".into(), 42.0),
            ]
            .into(),
            seed: 0xdead_beef_0000_0000 | now_ms,
        },
        outcome,
        arm: Some(Arm::Canary),
    }
}

/// Logs `decisions` (in order) keeping the newest `keep`.
pub fn log(decisions: Vec<LoggedDecision>, keep: u64) -> WriteOp {
    WriteOp::LogDecisions {
        decisions: DecisionPage::of(&decisions).unwrap(),
        keep,
    }
}

/// The whole decision log, oldest first.
pub fn decision_log(s: &dyn Store) -> Vec<LoggedDecision> {
    s.decisions(&DecisionFilter::default()).unwrap()
}

/// Applies `ops`; every op must succeed.
pub fn apply(s: &dyn Store, ops: impl Into<Vec<WriteOp>>) -> Vec<Applied> {
    s.apply(&ops.into()).unwrap()
}

/// Applies `ops`, each of which must be written.
pub fn apply_done(s: &dyn Store, ops: impl Into<Vec<WriteOp>>) {
    let ops = ops.into();
    let applied = s.apply(&ops).unwrap();
    assert_eq!(applied, vec![Applied::Done; ops.len()], "{ops:?}");
}

/// The retries for `ids` (those that exist), by id: the contract does not order them.
pub fn retries(s: &dyn Store, ids: &[MessageId]) -> Vec<ScheduledRetry> {
    let mut retries = s.retries(ids).unwrap();
    retries.sort_by(|a, b| a.message.id.cmp(&b.message.id));
    retries
}

/// The known fates among `ids`, by id: the contract does not order them.
pub fn fates(s: &dyn Store, ids: &[MessageId]) -> Vec<(MessageId, Fate)> {
    let mut fates = s.known_fates(ids).unwrap();
    fates.sort_by(|a, b| a.0.cmp(&b.0));
    fates
}

pub fn fate(s: &dyn Store, id: &str) -> Option<Fate> {
    let fates = s.known_fates(&[mid(id)]).unwrap();
    assert!(fates.len() <= 1, "{fates:?}");
    fates.into_iter().next().map(|(known, fate)| {
        assert_eq!(known, mid(id));
        fate
    })
}

pub fn scheduled_ids(s: &dyn Store) -> Vec<(MessageId, Timestamp)> {
    s.scheduled().unwrap()
}

pub fn ids(page: &Page<StoredDeadLetter, DeadLetterId>) -> Vec<&str> {
    page.items
        .iter()
        .map(|d| d.letter.message.id.as_str())
        .collect()
}

pub fn seed_dead_letters(s: &dyn Store) {
    apply_done(
        s,
        [
            dead(letter("o1", "ORDER", "L1", "BAD_JSON", 100)),
            dead(letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200)),
            dead(letter("p1", "PAYMENT", "L1", "PAY_PROCESSING", 300)),
            dead(letter("p2", "PAYMENT", "L3", "BAD_JSON", 400)),
            dead(letter("i1", "INVENTORY", "L1", "BAD_JSON", 500)),
        ],
    );
}

/// Every dead letter, newest first, through every page.
pub fn all_dead_letters(s: &dyn Store) -> Vec<StoredDeadLetter> {
    let mut letters = Vec::new();
    let mut filter = DeadLetterFilter {
        limit: MAX_PAGE,
        ..Default::default()
    };
    loop {
        let page = s.dead_letters(&filter).unwrap();
        letters.extend(page.items);
        match page.next {
            Some(cursor) => filter.before = Some(cursor),
            None => return letters,
        }
    }
}

pub fn all_audit(s: &dyn Store) -> Vec<AuditEntry> {
    s.audit_log(&AuditFilter {
        limit: MAX_PAGE,
        ..Default::default()
    })
    .unwrap()
    .items
}

/// Fills `scheduler` from the store the way a restart does: every scheduled id at its due
/// time. Returns how many.
pub fn recover(s: &dyn Store, scheduler: &mut RetryScheduler<MessageId>) -> usize {
    let scheduled = s.scheduled().unwrap();
    for (id, due) in &scheduled {
        scheduler.schedule(id.clone(), *due);
    }
    scheduled.len()
}
