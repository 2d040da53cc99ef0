//! After a restart, the retries that came due while the process was down are spread over
//! `min(n / 1000, 60)` seconds in due order, not fired in one burst (operations.md, "Adaptive
//! retries at run time"). On manual time: the test moves the clock a millisecond at a time
//! and counts what the spout tasks' queues hand out in each 100 ms window.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::{Durable, DurableOptions};
use rebound_runtime::fate::RetryQueue;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::{ScheduledRetry, SqliteStore, Store, WriteOp};
use rebound_runtime::time::{ManualTime, TimeSource, Timestamp};
use rebound_runtime::topology::TaskInfo;

use super::durable_seams::failed;

/// The wall time the restarted process starts at.
const START: u64 = 1_800_000_000_000;
const OVERDUE: u64 = 10_000;
/// Retries not yet due at the restart, as ms after it: two inside the spread, one after.
const NOT_DUE: [u64; 3] = [2_500, 7_000, 90_000];

/// The overdue retries' due times: an hour before the restart, distinct, and not in id order
/// (7919 is prime to 10,000, so `i × 7919 mod 10,000` visits every millisecond once).
fn overdue_due(i: u64) -> Timestamp {
    Timestamp::from_millis(START - 3_600_000 + i * 7_919 % OVERDUE)
}

fn write_rows(store: &SqliteStore) {
    let mut ops: Vec<WriteOp> = (0..OVERDUE)
        .map(|i| {
            let m = failed(&format!("r{i:05}"), 1, Duration::from_secs(1));
            WriteOp::Schedule(ScheduledRetry::new(m, overdue_due(i)))
        })
        .collect();
    for (k, after) in NOT_DUE.iter().enumerate() {
        let m = failed(&format!("later-{k}"), 1, Duration::from_secs(1));
        let due = Timestamp::from_millis(START + after);
        ops.push(WriteOp::Schedule(ScheduledRetry::new(m, due)));
    }
    store.apply(&ops).unwrap();
}

/// Each queue hands out all that is due now, recorded as `(at, id)`.
fn pop_all(
    time: &ManualTime,
    at: u64,
    queues: &mut [Box<dyn RetryQueue>],
    fired: &mut Vec<(u64, String)>,
) {
    let now = time.now();
    for q in queues {
        while let Some(m) = q.pop_due(now) {
            fired.push((at, m.id.to_string()));
        }
    }
}

#[tokio::test]
async fn ten_thousand_overdue_retries_fire_over_ten_seconds_in_due_order_once_each() {
    let dir = tempfile::tempdir().unwrap();
    write_rows(&SqliteStore::open(dir.path()).unwrap());

    // The restart: a process on manual time, two spout tasks.
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let time = ManualTime::new(Timestamp::from_millis(START));
    let durable = Durable::new(
        store.clone(),
        Arc::new(time.clone()),
        DurableOptions::default(),
    );
    assert_eq!(durable.recover().unwrap().len(), OVERDUE as usize + 3);
    let seams = durable.seams(FixedPolicy::default());
    let mut queues: Vec<Box<dyn RetryQueue>> = (0..2)
        .map(|index| {
            (seams.retry_queues)(&TaskInfo {
                component: "orders",
                index,
                parallelism: 2,
            })
        })
        .collect();
    assert_eq!(queues.iter().map(|q| q.len()).sum::<usize>(), 10_003);

    // Every millisecond, each task takes all that is due; (ms after the restart, id).
    let mut fired: Vec<(u64, String)> = Vec::new();
    for ms in 0..=10_000 {
        pop_all(&time, ms, &mut queues, &mut fired);
        time.advance(Duration::from_millis(1));
    }

    // The ones not yet due kept their due times.
    let later: BTreeMap<&str, u64> = fired
        .iter()
        .filter(|(_, id)| id.starts_with("later-"))
        .map(|(at, id)| (id.as_str(), *at))
        .collect();
    assert_eq!(
        later,
        BTreeMap::from([("later-0", NOT_DUE[0]), ("later-1", NOT_DUE[1])])
    );
    let overdue: Vec<&(u64, String)> = fired.iter().filter(|(_, id)| id.starts_with('r')).collect();

    // All of them, none twice, in due order.
    assert_eq!(overdue.len(), OVERDUE as usize);
    let distinct: BTreeSet<&str> = overdue.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(distinct.len(), OVERDUE as usize, "none fired twice");
    let mut by_due: Vec<(Timestamp, String)> = (0..OVERDUE)
        .map(|i| (overdue_due(i), format!("r{i:05}")))
        .collect();
    by_due.sort();
    let order: Vec<&str> = overdue.iter().map(|(_, id)| id.as_str()).collect();
    let expected: Vec<&str> = by_due.iter().map(|(_, id)| id.as_str()).collect();
    assert!(order == expected, "fired in due order, oldest first");

    // Spread over 10 s: about 100 in each 100 ms window, none before the restart's first
    // millisecond and none after the tenth second.
    let mut windows = [0u32; 100];
    for (at, id) in &overdue {
        assert!(*at < 10_000, "{id} fired at {at} ms, after the spread");
        windows[(*at / 100) as usize] += 1;
    }
    for (w, n) in windows.iter().enumerate() {
        assert!(
            (50..=150).contains(n),
            "window {w} (from {} ms) held {n}",
            w * 100
        );
    }
    assert_eq!(overdue[0].0, 0, "the oldest fires at once");

    // The store's rows keep the due times the rules gave them (a second crash spreads again).
    let rows = store.scheduled().unwrap();
    let stored: BTreeMap<String, Timestamp> = rows
        .into_iter()
        .map(|(id, due)| (id.to_string(), due))
        .collect();
    assert_eq!(stored["r00001"], overdue_due(1));
    assert_eq!(stored.len(), 10_003);

    // And the last one not yet due comes at its time.
    assert_eq!(queues.iter().map(|q| q.len()).sum::<usize>(), 1);
    time.advance(Duration::from_millis(NOT_DUE[2] - 10_001));
    pop_all(&time, NOT_DUE[2], &mut queues, &mut fired);
    assert_eq!(fired.last().unwrap(), &(NOT_DUE[2], "later-2".to_owned()));
}
