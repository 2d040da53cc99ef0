//! Cases: the decision log. Appended in order, trimmed to the newest `keep` of the whole log in
//! the same transaction, read oldest first through `since` (on the decision's `now_ms`) and
//! `limit` (the newest); every field of an entry read back as written; nothing else in the
//! store written (no retry row, no fate, no audit line).

use crate::store::*;
use rebound_engine::release::LoggedDecision;

use super::records::*;

/// What a store shows besides its decision log, for the ids the cases use.
#[derive(Debug, PartialEq)]
struct Rest {
    scheduled: Vec<(MessageId, crate::time::Timestamp)>,
    retries: Vec<ScheduledRetry>,
    fates: Vec<(MessageId, Fate)>,
    dead_letters: Vec<StoredDeadLetter>,
    audit: Vec<AuditEntry>,
}

fn rest(s: &dyn Store, ids: &[&str]) -> Rest {
    let ids: Vec<MessageId> = ids.iter().map(|id| mid(id)).collect();
    Rest {
        scheduled: s.scheduled().unwrap(),
        retries: retries(s, &ids),
        fates: fates(s, &ids),
        dead_letters: all_dead_letters(s),
        audit: all_audit(s),
    }
}

fn filtered(s: &dyn Store, since: Option<u64>, limit: Option<usize>) -> Vec<u64> {
    s.decisions(&DecisionFilter {
        since: since.map(ms),
        limit,
    })
    .unwrap()
    .iter()
    .map(|d| d.context.now_ms)
    .collect()
}

pub fn the_decision_log_keeps_the_newest_entries_oldest_first_and_writes_nothing_else(
    s: &dyn Store,
) {
    // A retry row and a fate that the log must leave alone; decisions of the same messages.
    apply_done(s, [schedule(retry("m1", 9_000)), acked("m2", 100)]);
    let ids = ["m1", "m2", "m3"];
    let before = rest(s, &ids);
    assert!(decision_log(s).is_empty(), "a new store logs nothing");

    // Three batches, keep 5: the first three entries, then five, then the newest five of
    // eight. (The `now_ms` of the log's order need not increase: 1_050 comes after 1_060.)
    let batches = [
        vec![
            logged("m1", 1_000),
            logged("m2", 1_010),
            logged("m3", 1_020),
        ],
        vec![logged("m1", 1_030), logged("m3", 1_040)],
        vec![
            logged("m1", 1_060),
            logged("m2", 1_050),
            logged("m3", 1_070),
        ],
    ];
    let all: Vec<LoggedDecision> = batches.iter().flatten().cloned().collect();
    for (n, batch) in batches.iter().enumerate() {
        assert_eq!(
            apply(s, [log(batch.clone(), 5)]),
            [Applied::Done],
            "batch {n}"
        );
    }
    assert_eq!(
        decision_log(s),
        all[3..],
        "the newest five, oldest first, every field as written"
    );

    // limit: the newest n, still oldest first.
    assert_eq!(filtered(s, None, Some(2)), [1_050, 1_070]);
    assert_eq!(filtered(s, None, Some(0)), Vec::<u64>::new());
    assert_eq!(
        filtered(s, None, Some(100)),
        [1_030, 1_040, 1_060, 1_050, 1_070]
    );
    // since: on the decision's time (at or after), in the log's order.
    assert_eq!(filtered(s, Some(1_050), None), [1_060, 1_050, 1_070]);
    assert_eq!(filtered(s, Some(1_041), None), [1_060, 1_050, 1_070]);
    assert_eq!(filtered(s, Some(1_071), None), Vec::<u64>::new());
    assert_eq!(
        filtered(s, Some(0), None),
        [1_030, 1_040, 1_060, 1_050, 1_070]
    );
    // Both: the newest `limit` of those since.
    assert_eq!(filtered(s, Some(1_040), Some(2)), [1_050, 1_070]);
    assert_eq!(filtered(s, Some(1_060), Some(1)), [1_070]);

    assert_eq!(
        rest(s, &ids),
        before,
        "the log writes no row, no fate, no audit line"
    );
}

pub fn the_decision_log_is_written_in_order_with_the_other_ops_of_its_batch(s: &dyn Store) {
    // One batch: a schedule, a log, an ack that takes the retry's row, another log.
    let answers = apply(
        s,
        [
            schedule(retry("m1", 9_000)),
            log(vec![logged("m1", 2_000)], 10),
            acked("m1", 2_001),
            log(vec![logged("m4", 2_002), logged("m5", 2_003)], 2),
        ],
    );
    assert_eq!(answers, vec![Applied::Done; 4]);
    assert_eq!(fate(s, "m1"), Some(Fate::Acked));
    assert!(s.scheduled().unwrap().is_empty());
    // The second log kept the newest two of the whole log, the first one's entry trimmed.
    assert_eq!(decision_log(s), [logged("m4", 2_002), logged("m5", 2_003)]);
    assert_eq!(fate(s, "m4"), None, "a logged decision is no fate");
}

pub fn the_decision_log_applied_twice_logs_again_and_keep_zero_empties_it(s: &dyn Store) {
    let batch = [log(vec![logged("a", 10), logged("b", 11)], 3)];
    apply_done(s, batch.clone());
    // A batch replayed after a lost reply logs its entries again (a sample, not a record),
    // and the trim still holds the log to `keep`.
    apply_done(s, batch);
    assert_eq!(
        decision_log(s),
        [logged("b", 11), logged("a", 10), logged("b", 11)]
    );
    // keep 0: the whole log goes, what the op logs included.
    apply_done(s, [log(vec![logged("c", 12)], 0)]);
    assert!(decision_log(s).is_empty());
    // An empty batch of decisions trims too.
    apply_done(s, [log(vec![logged("d", 13), logged("e", 14)], 9)]);
    apply_done(s, [log(vec![], 1)]);
    assert_eq!(decision_log(s), [logged("e", 14)]);
}
