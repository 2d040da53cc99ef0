//! Cases: recovery, the retry row, first fate wins, pruning, positions, mixed ops in order,
//! and applying the same batch twice.

use std::path::Path;

use crate::scheduler::RetryScheduler;
use crate::store::*;
use crate::time::Timestamp;

use super::Open;
use super::records::*;

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

/// `PruneFates` forgets the acked fates without an offset recorded before its time, and only
/// them: a fate at that time or later, one with an offset (its position prunes it), a dead
/// letter's and a retry row stay. A pruned message is unknown: it may be scheduled again (a
/// redelivery after the retention is a new delivery). Pruning in steps gets them all, and
/// pruning what is pruned is nothing.
pub fn pruning_by_time_forgets_only_old_acked_fates_without_an_offset(s: &dyn Store) {
    let mut old: Vec<WriteOp> = (0..250)
        .map(|i| acked(&format!("old-{i}"), 10 + i))
        .collect();
    old.extend([
        acked("at-the-line", 1_000),
        acked("new", 2_000),
        acked_at("positioned", 10, "orders", 1),
        dead(letter("dead", "ORDER", "L1", "X", 5)),
        schedule(retry("waiting", 50)),
    ]);
    apply_done(s, old);
    apply_done(s, [WriteOp::PruneFates { before: ms(1_000) }]);
    let ids: Vec<MessageId> = (0..250)
        .map(|i| mid(&format!("old-{i}")))
        .chain(["at-the-line", "new", "positioned", "dead"].map(mid))
        .collect();
    assert_eq!(
        fates(s, &ids),
        [
            (mid("at-the-line"), Fate::Acked),
            (mid("dead"), Fate::DeadLettered),
            (mid("new"), Fate::Acked),
            (mid("positioned"), Fate::Acked),
        ]
    );
    assert_eq!(scheduled_ids(s), [(mid("waiting"), ms(50))]);
    // Forgotten: a redelivery of it may be scheduled again; a kept fate still refuses one.
    assert_eq!(
        apply(
            s,
            [schedule(retry("old-7", 60)), schedule(retry("new", 60))]
        ),
        [Applied::Done, Applied::FateAlreadyKnown(Fate::Acked)]
    );
    apply_done(
        s,
        [
            WriteOp::PruneFates { before: ms(1_000) },
            WriteOp::PruneFates { before: ms(3_000) },
        ],
    );
    assert_eq!(
        fates(s, &ids),
        [
            (mid("dead"), Fate::DeadLettered),
            (mid("positioned"), Fate::Acked)
        ]
    );
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
