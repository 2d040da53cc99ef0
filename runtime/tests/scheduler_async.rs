//! The async side of the scheduler, on virtual time: `next_due` waits on the clock, never
//! returns early, is cancel-safe, and works inside the `select!` loop a runtime would write.

use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::clock::{Clock, ManualClock, Timestamp, WallClock};
use rebound_runtime::scheduler::RetryScheduler;

fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

#[tokio::test(start_paused = true)]
async fn next_due_waits_for_the_manual_clock_and_is_cancel_safe() {
    let clock = ManualClock::new(ms(0));
    let mut q = RetryScheduler::new(Arc::new(clock.clone()));
    q.schedule("late", ms(100));
    q.schedule("early", ms(50));

    // Virtual time stands still: nothing is due, so next_due must not complete. (tokio's clock
    // is paused too, so this timeout elapses instantly, without real waiting.)
    let waited = tokio::time::timeout(Duration::from_secs(3600), q.next_due()).await;
    assert!(waited.is_err(), "fired before its due time");
    assert_eq!(q.len(), 2, "a cancelled next_due removed nothing");

    clock.set(ms(49));
    assert!(
        tokio::time::timeout(Duration::from_secs(1), q.next_due())
            .await
            .is_err()
    );
    clock.set(ms(50));
    let e = q.next_due().await;
    assert_eq!((e.id, e.due), ("early", ms(50)));
    assert!(clock.now() >= e.due);
}

#[tokio::test(start_paused = true)]
async fn next_due_wakes_when_another_task_advances_time() {
    let clock = ManualClock::new(ms(0));
    let mut q = RetryScheduler::new(Arc::new(clock.clone()));
    for (id, due) in [(1u32, 30), (2, 10), (3, 10), (4, 70)] {
        q.schedule(id, ms(due));
    }
    let ticker = {
        let clock = clock.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                clock.advance(Duration::from_millis(10));
            }
        })
    };
    let mut fired = Vec::new();
    while !q.is_empty() {
        let e = q.next_due().await;
        assert!(clock.now() >= e.due, "never early");
        fired.push(e.id);
    }
    assert_eq!(fired, [2, 3, 1, 4]);
    ticker.await.unwrap();
}

/// The shape a spout executor would use: new retries arrive on a channel while it waits.
#[tokio::test(start_paused = true)]
async fn select_loop_picks_up_an_earlier_entry_scheduled_while_waiting() {
    let clock = ManualClock::new(ms(0));
    let mut q = RetryScheduler::new(Arc::new(clock.clone()));
    q.schedule("far", ms(1_000));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(&str, Timestamp)>(8);
    let driver = {
        let clock = clock.clone();
        tokio::spawn(async move {
            tx.send(("near", ms(20))).await.unwrap();
            for _ in 0..200 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                clock.advance(Duration::from_millis(10));
            }
        })
    };
    let mut fired = Vec::new();
    while fired.len() < 2 {
        tokio::select! {
            e = q.next_due() => {
                assert!(clock.now() >= e.due);
                fired.push((e.id, e.due));
            }
            Some((id, due)) = rx.recv() => { q.schedule(id, due); }
        }
    }
    assert_eq!(fired, [("near", ms(20)), ("far", ms(1_000))]);
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn next_due_batch_returns_everything_due_at_once_up_to_the_limit() {
    let clock = ManualClock::new(ms(100));
    let mut q = RetryScheduler::new(Arc::new(clock.clone()));
    for id in 0..10u32 {
        q.schedule(id, ms(90 + u64::from(id) % 3)); // all already due
    }
    q.schedule(99, ms(500));
    let first = q.next_due_batch(4).await;
    assert_eq!(first.len(), 4);
    let rest = q.next_due_batch(100).await;
    assert_eq!(rest.len(), 6);
    assert!(
        first
            .iter()
            .chain(&rest)
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[0].due <= w[1].due)
    );
    assert_eq!(q.len(), 1);
}

#[tokio::test]
async fn scaled_wall_clock_drives_next_due_without_firing_early() {
    // 10,000× faster: 2 virtual seconds pass in 0.2 real milliseconds.
    let clock = Arc::new(WallClock::scaled(10_000.0).unwrap());
    let mut q = RetryScheduler::new(clock.clone());
    let now = clock.now();
    q.schedule(1u8, now + Duration::from_secs(2));
    q.schedule(2u8, now + Duration::from_secs(1));
    let a = q.next_due().await;
    assert!(clock.now() >= a.due);
    let b = q.next_due().await;
    assert!(clock.now() >= b.due);
    assert_eq!((a.id, b.id), (2, 1));
}
