//! The [`Store`] contract as a conformance suite: every case takes a store as `&dyn Store` (or,
//! if it must reopen one, the factory that opens a store in a directory), so that every
//! implementation runs the same cases. One line runs them all over an implementation:
//!
//! ```ignore
//! conformance_suite!(sqlite, open_sqlite); // open_sqlite: fn(&Path) -> Box<dyn Store>
//! ```
//!
//! The factory is given a fresh, empty directory per case; opening it again on the same
//! directory must give back the same data (for SQLite, the file in it; for a shared store, the
//! namespace the directory names).
//!
//! What the cases pin, from the contract in `store/mod.rs`: recovery of scheduled retries with
//! their due times, the retry row living until the fate, first fate wins, acked fates pruned
//! behind their source's position (only their own source's, never dead-lettered ones), positions
//! only moving forward, mixed ops in order in one transaction, dead-letter listing and paging,
//! a dead letter keeping its failure's attrs, replay and skip with the audit log and their
//! refusals as [`Applied`] replies, and applying the same batch twice ending in the same state.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::scheduler::RetryScheduler;
use rebound_runtime::store::*;
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, LastFailure};

/// Opens (creating if missing) a store whose data lives in the given directory.
pub type Open = fn(&Path) -> Box<dyn Store>;

/// Runs every case of the suite over the store `$open` opens, as `#[test]`s in module `$name`.
macro_rules! conformance_suite {
    ($name:ident, $open:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use $crate::conformance::{self as suite, Open};

            const OPEN: Open = $open;

            conformance_suite!(@on_a_store
                retry_row_lives_until_the_fate_is_recorded,
                first_fate_wins_and_a_second_fate_is_reported_not_written,
                pruning_forgets_old_acks_but_keeps_dead_letter_fates,
                a_position_prunes_only_its_own_sources_acked_fates_with_offsets,
                apply_runs_mixed_ops_in_order_in_one_transaction,
                positions_are_kept_per_source,
                positions_only_move_forward,
                dead_letters_filter_by_label_biz_code_and_time_newest_first,
                dead_letters_page_with_a_cursor,
                a_dead_letter_keeps_its_failures_attrs,
                replay_makes_a_fresh_delivery_keeps_history_and_is_audited,
                replayed_message_acked_afterwards_takes_the_new_fate,
                skip_marks_handled_keeps_the_fate_and_is_audited,
                replay_and_skip_refusals_come_back_as_replies_and_change_nothing,
                blank_operator_or_reason_is_refused_and_changes_nothing,
                unknown_dead_letter_is_a_clear_not_found,
                audit_log_pages_newest_first,
                applying_the_same_batch_twice_ends_in_the_same_state,
            );
            conformance_suite!(@reopening
                recovery_restores_every_retry_with_its_original_due_time_and_overdue_ones_fire_at_once,
                recovered_overdue_retry_is_returned_by_pop_due_without_waiting,
            );
        }
    };
    (@on_a_store $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let dir = tempfile::tempdir().unwrap();
                let store = OPEN(dir.path());
                suite::$case(&*store);
            }
        )*
    };
    (@reopening $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let dir = tempfile::tempdir().unwrap();
                suite::$case(OPEN, dir.path());
            }
        )*
    };
}

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
    message.retry.last_failure = Some(Box::new(LastFailure {
        code: "DB_LOCK_WAIT".into(),
        message: "lock wait".into(),
        at: ms(due).saturating_sub(delay),
        delay,
        rule: RuleRef::Rule("db-lock".into()),
        version: v1(),
    }));
    ScheduledRetry {
        message,
        due: ms(due),
    }
}

/// A dead letter as a store reads it back: its message without an offset or a last retried
/// failure, its failure without `retry_after`, and with attrs.
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

fn scheduled_ids(s: &dyn Store) -> Vec<(MessageId, Timestamp)> {
    s.scheduled().unwrap()
}

fn ids(page: &Page<StoredDeadLetter, DeadLetterId>) -> Vec<&str> {
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

fn all_audit(s: &dyn Store) -> Vec<AuditEntry> {
    s.audit_log(&AuditFilter {
        limit: MAX_PAGE,
        ..Default::default()
    })
    .unwrap()
    .items
}

/// Fills `scheduler` from the store the way a restart does: every scheduled id at its due
/// time. Returns how many.
fn recover(s: &dyn Store, scheduler: &mut RetryScheduler<MessageId>) -> usize {
    let scheduled = s.scheduled().unwrap();
    for (id, due) in &scheduled {
        scheduler.schedule(id.clone(), *due);
    }
    scheduled.len()
}

// ---- recovery ----------------------------------------------------------------------------

pub fn recovery_restores_every_retry_with_its_original_due_time_and_overdue_ones_fire_at_once(
    open: Open,
    dir: &Path,
) {
    let store = open(dir);
    apply_done(
        &*store,
        [
            schedule(retry("a", 1_000_500)),
            schedule(retry("b", 2_000_000)),
            schedule(retry("c", 1_000_100)),
        ],
    );
    let written = retries(&*store, &[mid("a"), mid("b"), mid("c")]);
    assert_eq!(
        written,
        [
            retry("a", 1_000_500),
            retry("b", 2_000_000),
            retry("c", 1_000_100)
        ],
        "every retry reads back as written"
    );
    drop(store);

    // Restart later: "a" and "c" came due while the process was down.
    let store = open(dir);
    let mut scheduler = RetryScheduler::new();
    assert_eq!(recover(&*store, &mut scheduler), 3);

    let due = scheduler.drain_due(ms(1_500_000), 100);
    let due: Vec<_> = due.iter().map(|e| (e.id.as_str(), e.due)).collect();
    assert_eq!(due, [("c", ms(1_000_100)), ("a", ms(1_000_500))]);
    assert_eq!(scheduler.due_of(&mid("b")), Some(ms(2_000_000)));
    // The payload and metadata come back byte for byte.
    assert_eq!(retries(&*store, &[mid("a"), mid("b"), mid("c")]), written);
}

pub fn recovered_overdue_retry_is_returned_by_pop_due_without_waiting(open: Open, dir: &Path) {
    apply_done(&*open(dir), [schedule(retry("x", 10))]);
    let store = open(dir);
    let mut scheduler = RetryScheduler::new();
    recover(&*store, &mut scheduler);
    let now = ms(1_000_000);
    assert!(scheduler.next_due_time().is_some_and(|due| due <= now));
    let e = scheduler
        .pop_due(now)
        .expect("an overdue retry fires at once");
    assert_eq!((e.id, e.due), (mid("x"), ms(10)));
    assert_eq!(retries(&*store, &[mid("x")]), [retry("x", 10)]);
}

pub fn retry_row_lives_until_the_fate_is_recorded(s: &dyn Store) {
    apply_done(s, [schedule(retry("a", 5)), schedule(retry("b", 6))]);
    // Rescheduling replaces, never duplicates.
    apply_done(s, [schedule(retry("a", 7))]);
    assert_eq!(scheduled_ids(s), [(mid("b"), ms(6)), (mid("a"), ms(7))]);
    assert_eq!(retries(s, &[mid("a")]), [retry("a", 7)]);
    apply_done(s, [acked("a", 8)]);
    assert_eq!(scheduled_ids(s), [(mid("b"), ms(6))]);
    apply_done(s, [dead(letter("b", "ORDER", "L1", "X", 9))]);
    assert!(scheduled_ids(s).is_empty());
    assert!(retries(s, &[mid("a"), mid("b")]).is_empty());
}

// ---- one fate per message ----------------------------------------------------------------

pub fn first_fate_wins_and_a_second_fate_is_reported_not_written(s: &dyn Store) {
    assert_eq!(apply(s, [acked("m1", 1)]), [Applied::Done]);
    let applied = apply(
        s,
        [
            dead(letter("m1", "ORDER", "L1", "X", 2)),
            dead(letter("m2", "ORDER", "L1", "X", 2)),
        ],
    );
    assert_eq!(
        applied,
        [Applied::FateAlreadyKnown(Fate::Acked), Applied::Done]
    );
    assert!(s.dead_letter(&mid("m1")).unwrap().is_none(), "never both");
    assert_eq!(
        apply(s, [acked("m2", 3)]),
        [Applied::FateAlreadyKnown(Fate::DeadLettered)]
    );
    // An acked fate with an offset is a fate like any other.
    assert_eq!(
        apply(s, [acked_at("m2", 3, "src", 2)]),
        [Applied::FateAlreadyKnown(Fate::DeadLettered)]
    );
    let known = fates(s, &[mid("m1"), mid("m2"), mid("m3")]);
    assert_eq!(
        known,
        [(mid("m1"), Fate::Acked), (mid("m2"), Fate::DeadLettered)]
    );
    assert_eq!(fate(s, "m3"), None);
    // Nor can a message with a fate be scheduled again (it could end with a second fate).
    assert_eq!(
        apply(s, [schedule(retry("m1", 5)), schedule(retry("m3", 5))]),
        [Applied::FateAlreadyKnown(Fate::Acked), Applied::Done]
    );
    assert_eq!(scheduled_ids(s), [(mid("m3"), ms(5))]);
}

/// Acked fates are forgotten once their source's position passes them; dead-lettered fates
/// (and acked fates without an offset) are kept.
pub fn pruning_forgets_old_acks_but_keeps_dead_letter_fates(s: &dyn Store) {
    apply_done(
        s,
        [
            acked_at("old", 10, "orders", 1),
            acked_at("older", 10, "orders", 2),
            acked_at("new", 20, "orders", 4),
            acked("unpositioned", 10),
            dead(letter("dead", "ORDER", "L1", "X", 5)),
        ],
    );
    apply_done(s, [position("orders", 3, 30)]);
    let known = fates(s, &["old", "older", "new", "unpositioned", "dead"].map(mid));
    assert_eq!(
        known,
        [
            (mid("dead"), Fate::DeadLettered),
            (mid("new"), Fate::Acked),
            (mid("unpositioned"), Fate::Acked)
        ]
    );
    // The dead letter itself is untouched, and a position past everything keeps its fate.
    apply_done(s, [position("orders", 1_000, 40)]);
    assert_eq!(fate(s, "new"), None);
    assert_eq!(fate(s, "dead"), Some(Fate::DeadLettered));
    assert_eq!(fate(s, "unpositioned"), Some(Fate::Acked));
    assert_eq!(
        s.dead_letter(&mid("dead")).unwrap().unwrap().letter,
        letter("dead", "ORDER", "L1", "X", 5)
    );
}

/// A position prunes the acked fates at or below it of its own source only, in the same
/// transaction as the fates it covers; positions of other sources (even with the same number)
/// prune nothing else.
pub fn a_position_prunes_only_its_own_sources_acked_fates_with_offsets(s: &dyn Store) {
    apply_done(
        s,
        [
            acked_at("a1", 1, "orders", 1),
            acked_at("a2", 1, "orders", 2),
            acked_at("a3", 1, "orders", 3),
            acked_at("p1", 1, "payments", 1),
            acked_at("p2", 1, "payments", 2),
            // A source whose name starts like another's is another source.
            acked_at("r1", 1, "orders.reserved", 1),
        ],
    );
    let all = ["a1", "a2", "a3", "p1", "p2", "r1"].map(mid);
    let known = |s: &dyn Store| -> Vec<String> {
        fates(s, &all)
            .into_iter()
            .map(|(id, fate)| {
                assert_eq!(fate, Fate::Acked);
                id.to_string()
            })
            .collect()
    };
    apply_done(s, [position("orders", 2, 2)]);
    assert_eq!(
        known(s),
        ["a3", "p1", "p2", "r1"],
        "at or below 2, of orders"
    );
    apply_done(s, [position("payments", 1, 3)]);
    assert_eq!(known(s), ["a3", "p2", "r1"]);
    // A lower position than the stored one prunes nothing more.
    apply_done(s, [position("orders", 1, 4)]);
    assert_eq!(known(s), ["a3", "p2", "r1"]);
    // A fate and the position that covers it, in one transaction: the fate is gone at once.
    apply_done(
        s,
        [acked_at("a4", 5, "orders", 4), position("orders", 4, 5)],
    );
    assert_eq!(fate(s, "a4"), None);
    assert_eq!(known(s), ["p2", "r1"]);
    assert_eq!(s.position("orders").unwrap(), Some(4));
    assert_eq!(s.position("payments").unwrap(), Some(1));
    assert_eq!(s.position("orders.reserved").unwrap(), None);
}

pub fn apply_runs_mixed_ops_in_order_in_one_transaction(s: &dyn Store) {
    let ops = [
        schedule(retry("a", 50)),
        schedule(retry("a", 60)),
        schedule(retry("b", 70)),
        acked("b", 71),
        // In order: b's fate is already written when its late retry comes.
        schedule(retry("b", 80)),
        position("orders", 42, 72),
    ];
    let applied = apply(s, ops);
    assert_eq!(
        applied,
        [
            Applied::Done,
            Applied::Done,
            Applied::Done,
            Applied::Done,
            Applied::FateAlreadyKnown(Fate::Acked),
            Applied::Done
        ]
    );
    assert_eq!(scheduled_ids(s), [(mid("a"), ms(60))]);
    assert_eq!(s.position("orders").unwrap(), Some(42));

    // A failing op rolls the whole batch back.
    let bad = [
        schedule(retry("c", 80)),
        acked("a", 81),
        position("orders", 43, 82),
        position("orders", u64::MAX, 83),
    ];
    let err = s.apply(&bad).unwrap_err();
    assert!(matches!(err, StoreError::OutOfRange { .. }), "{err}");
    assert_eq!(scheduled_ids(s), [(mid("a"), ms(60))]);
    assert_eq!(fate(s, "a"), None);
    assert_eq!(s.position("orders").unwrap(), Some(42));
}

pub fn positions_are_kept_per_source(s: &dyn Store) {
    assert_eq!(s.position("orders").unwrap(), None);
    apply_done(s, [position("orders", 10, 1)]);
    apply_done(s, [position("orders", 11, 2)]);
    apply_done(s, [position("payments", 3, 3)]);
    assert_eq!(s.position("orders").unwrap(), Some(11));
    assert_eq!(s.position("payments").unwrap(), Some(3));
    assert_eq!(s.position("inventory").unwrap(), None);
}

pub fn positions_only_move_forward(s: &dyn Store) {
    apply_done(s, [position("orders", 10, 1)]);
    // A lower position is ignored (a batch applied again, a late writer), not an error.
    assert_eq!(apply(s, [position("orders", 7, 2)]), [Applied::Done]);
    assert_eq!(s.position("orders").unwrap(), Some(10));
    apply_done(s, [position("orders", 10, 3)]);
    assert_eq!(s.position("orders").unwrap(), Some(10));
    apply_done(s, [position("orders", 12, 4)]);
    assert_eq!(s.position("orders").unwrap(), Some(12));
    // Within one batch too: the highest wins, whatever the order.
    apply_done(
        s,
        [
            position("orders", 20, 5),
            position("orders", 15, 6),
            position("payments", 2, 6),
            position("payments", 1, 7),
        ],
    );
    assert_eq!(s.position("orders").unwrap(), Some(20));
    assert_eq!(s.position("payments").unwrap(), Some(2));
}

// ---- dead letters ------------------------------------------------------------------------

pub fn dead_letters_filter_by_label_biz_code_and_time_newest_first(s: &dyn Store) {
    seed_dead_letters(s);
    let all = s.dead_letters(&DeadLetterFilter::default()).unwrap();
    assert_eq!(ids(&all), ["i1", "p2", "p1", "o2", "o1"]);
    assert_eq!(all.next, None);

    let by = |filter: DeadLetterFilter| s.dead_letters(&filter).unwrap();
    let l1 = by(DeadLetterFilter {
        label: Some("L1".into()),
        ..Default::default()
    });
    assert_eq!(ids(&l1), ["i1", "p1", "o1"]);
    let payment_bad_json = by(DeadLetterFilter {
        biz: Some("PAYMENT".into()),
        code: Some("BAD_JSON".into()),
        ..Default::default()
    });
    assert_eq!(ids(&payment_bad_json), ["p2"]);
    let window = by(DeadLetterFilter {
        since: Some(ms(200)),
        until: Some(ms(400)),
        ..Default::default()
    });
    assert_eq!(ids(&window), ["p1", "o2"]);

    // Every field comes back as written.
    let o2 = &window.items[1];
    assert_eq!(o2.letter, letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200));
    assert_eq!(o2.status, DeadLetterStatus::Dead);
    assert_eq!(s.dead_letter(&mid("o2")).unwrap().as_ref(), Some(o2));
}

pub fn dead_letters_page_with_a_cursor(s: &dyn Store) {
    seed_dead_letters(s);
    let mut filter = DeadLetterFilter {
        limit: 2,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = s.dead_letters(&filter).unwrap();
        seen.extend(ids(&page).into_iter().map(String::from));
        match page.next {
            Some(cursor) => filter.before = Some(cursor),
            None => break,
        }
    }
    assert_eq!(seen, ["i1", "p2", "p1", "o2", "o1"]);
}

/// A dead letter keeps the failure's attrs. What it does not keep is what no operator needs:
/// the message's source offset, its last *retried* failure (the letter's failure is the one
/// that ended it), and the failure's `retry_after`.
pub fn a_dead_letter_keeps_its_failures_attrs(s: &dyn Store) {
    let mut written = letter("m", "PAYMENT", "L2", "PAY_DECLINED", 1_000);
    written.failure = Failure::new("PAY_DECLINED", "card declined")
        .with_attr("http_status", "402")
        .with_attr("endpoint", "/pay")
        .with_attr("note", "ünïcode, \"quotes\" and {braces}")
        .with_retry_after(Duration::from_secs(30));
    written.message = written.message.with_offset(17);
    written.message.retry.last_failure = retry("m", 900).message.retry.last_failure;
    written.reason = GiveUpReason::GiveUp;
    written.rule = RuleRef::Defaults;
    apply_done(s, [dead(written.clone())]);
    let plain = letter("plain", "ORDER", "L1", "X", 1_001);
    let mut without_attrs = plain.clone();
    without_attrs.failure.attrs = BTreeMap::new();
    apply_done(s, [dead(without_attrs.clone())]);

    let stored = s.dead_letter(&mid("m")).unwrap().unwrap();
    let attrs: BTreeMap<String, String> = [
        ("endpoint", "/pay"),
        ("http_status", "402"),
        ("note", "ünïcode, \"quotes\" and {braces}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(stored.letter.failure.attrs, attrs);
    let mut expected = written;
    expected.message.offset = None;
    expected.message.retry.last_failure = None;
    expected.failure.retry_after = None;
    assert_eq!(stored.letter, expected);
    // Listed the same way, and a letter without attrs reads back without.
    let listed = all_dead_letters(s);
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1], stored);
    assert_eq!(listed[0].letter, without_attrs);
}

pub fn replay_makes_a_fresh_delivery_keeps_history_and_is_audited(s: &dyn Store) {
    seed_dead_letters(s);
    let fresh = replay(s, action("p1", "  alice ", " gateway fixed ", 2_000_000)).unwrap();
    let mut delivery = message("p1", "PAYMENT");
    delivery.retry.first_delivery = Some(ms(2_000_000));
    assert_eq!(fresh.message, delivery);
    assert_eq!(fresh.due, ms(2_000_000));
    assert_eq!(fresh.message.retry.attempt, 0);
    assert_eq!(fresh.message.retry.first_delivery, Some(ms(2_000_000)));
    assert_eq!(fresh.message.retry.last_failure, None);
    // It is scheduled (so a restart would still deliver it) and no longer has a fate.
    assert_eq!(scheduled_ids(s), [(mid("p1"), ms(2_000_000))]);
    assert_eq!(retries(s, &[mid("p1")]), std::slice::from_ref(&fresh));
    assert_eq!(fate(s, "p1"), None);
    let dl = s.dead_letter(&mid("p1")).unwrap().unwrap();
    assert_eq!(dl.status, DeadLetterStatus::Replayed);
    assert_eq!(
        dl.letter,
        letter("p1", "PAYMENT", "L1", "PAY_PROCESSING", 300)
    );

    let audit = s.audit_log(&AuditFilter::default()).unwrap();
    assert_eq!(audit.items.len(), 1);
    let entry = &audit.items[0];
    assert_eq!(entry.action, AuditAction::Replay);
    assert_eq!(entry.message_id, mid("p1"));
    assert_eq!(entry.dead_letter, dl.id);
    assert_eq!(
        (entry.operator.as_str(), entry.reason.as_str()),
        ("alice", "gateway fixed")
    );
    assert_eq!(entry.at, ms(2_000_000));

    // A second replay has nothing to replay.
    let err = replay(s, action("p1", "alice", "again", 2_000_001)).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyHandled {
                status: DeadLetterStatus::Replayed,
                ..
            }
        ),
        "{err}"
    );

    // The new delivery fails again: a second dead letter, the first one kept as history.
    apply_done(
        s,
        [dead(letter(
            "p1",
            "PAYMENT",
            "L2",
            "NET_TIMEOUT",
            2_000_100,
        ))],
    );
    let history = s
        .dead_letters(&DeadLetterFilter {
            biz: Some("PAYMENT".into()),
            ..Default::default()
        })
        .unwrap();
    let statuses: Vec<_> = history
        .items
        .iter()
        .filter(|d| d.letter.message.id == mid("p1"))
        .map(|d| d.status)
        .collect();
    assert_eq!(
        statuses,
        [DeadLetterStatus::Dead, DeadLetterStatus::Replayed]
    );
    assert_eq!(fate(s, "p1"), Some(Fate::DeadLettered));
    assert!(
        scheduled_ids(s).is_empty(),
        "the second letter drops the row"
    );
    // The latest letter is the one `dead_letter` answers, and it can be replayed in turn.
    let latest = s.dead_letter(&mid("p1")).unwrap().unwrap();
    assert_eq!(latest.status, DeadLetterStatus::Dead);
    assert_eq!(latest.letter.failure.code, "NET_TIMEOUT");
    assert!(latest.id > dl.id);
}

pub fn replayed_message_acked_afterwards_takes_the_new_fate(s: &dyn Store) {
    seed_dead_letters(s);
    replay(s, action("o1", "bob", "retry after deploy", 8)).unwrap();
    assert_eq!(apply(s, [acked("o1", 9)]), [Applied::Done]);
    assert_eq!(fate(s, "o1"), Some(Fate::Acked));
    assert!(scheduled_ids(s).is_empty());
}

pub fn skip_marks_handled_keeps_the_fate_and_is_audited(s: &dyn Store) {
    seed_dead_letters(s);
    let skipped = skip(s, action("o2", "carol", "duplicate order", 7)).unwrap();
    assert_eq!(skipped.status, DeadLetterStatus::Skipped);
    assert_eq!(
        skipped.letter,
        letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200)
    );
    assert_eq!(s.dead_letter(&mid("o2")).unwrap(), Some(skipped));
    assert_eq!(fate(s, "o2"), Some(Fate::DeadLettered));
    assert!(scheduled_ids(s).is_empty(), "a skip schedules nothing");
    let open = s
        .dead_letters(&DeadLetterFilter {
            status: Some(DeadLetterStatus::Dead),
            ..Default::default()
        })
        .unwrap();
    assert!(!ids(&open).contains(&"o2"));
    let audit = s
        .audit_log(&AuditFilter {
            message_id: Some(mid("o2")),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(audit.items.len(), 1);
    assert_eq!(audit.items[0].action, AuditAction::Skip);
    assert_eq!(audit.items[0].operator, "carol");
    assert_eq!(audit.items[0].at, ms(7));
    let err = replay(s, action("o2", "carol", "changed my mind", 8)).unwrap_err();
    assert!(matches!(
        err,
        StoreError::AlreadyHandled {
            status: DeadLetterStatus::Skipped,
            ..
        }
    ));
}

/// An operator action the store cannot carry out is a reply ([`Applied::NoDeadLetter`],
/// [`Applied::AlreadyHandled`]), not an error: it writes nothing (no audit line, no retry)
/// and the rest of its batch is written.
pub fn replay_and_skip_refusals_come_back_as_replies_and_change_nothing(s: &dyn Store) {
    seed_dead_letters(s);
    let replay_op = |id: &str, at| WriteOp::Replay(action(id, "ops", "try", at));
    let skip_op = |id: &str, at| WriteOp::Skip(action(id, "ops", "noise", at));
    assert_eq!(
        apply(
            s,
            [
                replay_op("nope", 1),
                skip_op("nope", 2),
                schedule(retry("x", 5))
            ]
        ),
        [Applied::NoDeadLetter, Applied::NoDeadLetter, Applied::Done]
    );
    assert!(all_audit(s).is_empty());
    assert_eq!(scheduled_ids(s), [(mid("x"), ms(5))]);

    let applied = apply(s, [replay_op("o1", 3), skip_op("o2", 4)]);
    assert!(
        matches!(&applied[..], [Applied::Replayed(r), Applied::Skipped(d)]
            if r.message.id == mid("o1") && d.status == DeadLetterStatus::Skipped),
        "{applied:?}"
    );
    let before = (
        all_audit(s),
        all_dead_letters(s),
        scheduled_ids(s),
        retries(s, &[mid("o1"), mid("x")]),
    );
    assert_eq!(
        apply(
            s,
            [
                replay_op("o1", 10),
                skip_op("o1", 11),
                replay_op("o2", 12),
                skip_op("o2", 13),
            ]
        ),
        [
            Applied::AlreadyHandled(DeadLetterStatus::Replayed),
            Applied::AlreadyHandled(DeadLetterStatus::Replayed),
            Applied::AlreadyHandled(DeadLetterStatus::Skipped),
            Applied::AlreadyHandled(DeadLetterStatus::Skipped),
        ]
    );
    let after = (
        all_audit(s),
        all_dead_letters(s),
        scheduled_ids(s),
        retries(s, &[mid("o1"), mid("x")]),
    );
    assert_eq!(after, before, "a refusal writes nothing");
    assert_eq!(
        fate(s, "o1"),
        None,
        "the replay cleared it; the refusals did not touch it"
    );
    assert_eq!(fate(s, "o2"), Some(Fate::DeadLettered));
}

pub fn blank_operator_or_reason_is_refused_and_changes_nothing(s: &dyn Store) {
    seed_dead_letters(s);
    for (operator, reason, field) in [
        ("", "because", "operator"),
        ("   ", "because", "operator"),
        ("dave", "", "reason"),
        ("dave", "\t\n", "reason"),
    ] {
        // A replay and a skip are both built as an action first; a blank one never exists.
        let err = OperatorAction::new(mid("o1"), operator, reason, ms(1)).unwrap_err();
        assert!(
            matches!(err, StoreError::Blank { field: f } if f == field),
            "{err}"
        );
        assert!(err.to_string().contains(field));
    }
    assert_eq!(
        s.dead_letter(&mid("o1")).unwrap().unwrap().status,
        DeadLetterStatus::Dead
    );
    assert!(
        s.audit_log(&AuditFilter::default())
            .unwrap()
            .items
            .is_empty()
    );
    assert!(scheduled_ids(s).is_empty());
}

pub fn unknown_dead_letter_is_a_clear_not_found(s: &dyn Store) {
    let err = replay(s, action("nope", "erin", "why not", 1)).unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(ref id) if *id == mid("nope")));
    assert_eq!(err.to_string(), "no dead letter for message nope");
    let err = skip(s, action("nope", "erin", "why not", 1)).unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(_)));
    // A message that was acked has a fate but no dead letter.
    apply_done(s, [acked("acked", 1)]);
    let err = replay(s, action("acked", "erin", "why not", 2)).unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(ref id) if *id == mid("acked")));
    assert_eq!(fate(s, "acked"), Some(Fate::Acked));
}

pub fn audit_log_pages_newest_first(s: &dyn Store) {
    seed_dead_letters(s);
    for id in ["o1", "o2", "p1"] {
        skip(s, action(id, "ops", "noise", 5)).unwrap();
    }
    let first = s
        .audit_log(&AuditFilter {
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    let order: Vec<_> = first
        .items
        .iter()
        .map(|e| e.message_id.to_string())
        .collect();
    assert_eq!(order, ["p1", "o2"]);
    let second = s
        .audit_log(&AuditFilter {
            before: first.next,
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert_eq!(second.items[0].message_id, mid("o1"));
    assert_eq!(second.next, None);
}

// ---- applying twice ----------------------------------------------------------------------

/// Everything a store shows, for the ids and sources given.
#[derive(Debug, PartialEq)]
struct Snapshot {
    scheduled: Vec<(MessageId, Timestamp)>,
    retries: Vec<ScheduledRetry>,
    fates: Vec<(MessageId, Fate)>,
    dead_letters: Vec<StoredDeadLetter>,
    audit: Vec<AuditEntry>,
    positions: Vec<Option<u64>>,
}

fn snapshot(s: &dyn Store, ids: &[MessageId], sources: &[&str]) -> Snapshot {
    Snapshot {
        scheduled: s.scheduled().unwrap(),
        retries: retries(s, ids),
        fates: fates(s, ids),
        dead_letters: all_dead_letters(s),
        audit: all_audit(s),
        positions: sources.iter().map(|src| s.position(src).unwrap()).collect(),
    }
}

/// A batch whose commit reply was lost is applied again: the store ends as if it had been
/// applied once, and says so (first fate wins, positions only move forward, an operator
/// action on a letter already handled is refused).
pub fn applying_the_same_batch_twice_ends_in_the_same_state(s: &dyn Store) {
    // Letters committed before: operators act on them in the batch.
    apply_done(
        s,
        [
            dead(letter("x", "ORDER", "L1", "BAD_JSON", 10)),
            dead(letter("y", "ORDER", "L2", "BAD_JSON", 11)),
        ],
    );
    // Everything the journal writes, in the order it would.
    let batch = vec![
        schedule(retry("a", 100)),
        schedule(retry("b", 100)),
        schedule(retry("a", 200)),
        schedule(retry("c", 300)),
        acked_at("b", 101, "orders", 2),
        acked_at("d", 102, "orders", 9),
        acked("e", 103),
        dead(letter("c", "ORDER", "L3", "DB_LOCK_WAIT", 104)),
        position("orders", 5, 105),
        position("orders.reserved", 4_101, 105),
        WriteOp::Replay(action("x", "alice", "fixed", 106)),
        WriteOp::Skip(action("y", "bob", "duplicate", 107)),
    ];
    let once = apply(s, batch.clone());
    assert!(
        matches!(
            &once[..10],
            [
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done,
                Applied::Done
            ]
        ),
        "{once:?}"
    );
    assert!(
        matches!(&once[10..], [Applied::Replayed(_), Applied::Skipped(_)]),
        "{once:?}"
    );
    let ids = ["a", "b", "c", "d", "e", "x", "y"].map(mid);
    let sources = ["orders", "orders.reserved"];
    let first = snapshot(s, &ids, &sources);
    assert_eq!(
        first.scheduled,
        [(mid("x"), ms(106)), (mid("a"), ms(200))],
        "{first:?}"
    );
    assert_eq!(
        first.fates,
        [
            (mid("c"), Fate::DeadLettered),
            (mid("d"), Fate::Acked),
            (mid("e"), Fate::Acked),
            (mid("y"), Fate::DeadLettered)
        ],
        "b's fate is behind the position"
    );

    let twice = apply(s, batch);
    assert_eq!(
        twice,
        [
            Applied::Done,
            // b's fate was pruned behind the position: its retry is upserted again, and
            // dropped again by the fate that follows it.
            Applied::Done,
            Applied::Done,
            Applied::FateAlreadyKnown(Fate::DeadLettered),
            Applied::Done,
            Applied::FateAlreadyKnown(Fate::Acked),
            Applied::FateAlreadyKnown(Fate::Acked),
            Applied::FateAlreadyKnown(Fate::DeadLettered),
            Applied::Done,
            Applied::Done,
            Applied::AlreadyHandled(DeadLetterStatus::Replayed),
            Applied::AlreadyHandled(DeadLetterStatus::Skipped),
        ]
    );
    assert_eq!(snapshot(s, &ids, &sources), first);
}
