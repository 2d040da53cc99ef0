//! What is left of the scheduler's async side. The scheduler no longer reads a clock and its
//! async `next_due` / `next_due_batch` are gone (production never used them; the spout task
//! asks `next_due_time` and drains with the `now` it read). Waiting on the clock, cancel
//! safety and the `select!` loop went with them; "never early", cancel and reschedule are
//! the model test's (`scheduler_model`). Kept: draining everything already due, up to a limit.

use rebound_runtime::scheduler::RetryScheduler;
use rebound_runtime::time::Timestamp;

fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

/// Formerly `next_due_batch`; now `drain_due` at the time the caller read.
#[test]
fn next_due_batch_returns_everything_due_at_once_up_to_the_limit() {
    let now = ms(100);
    let mut q = RetryScheduler::new();
    for id in 0..10u32 {
        q.schedule(id, ms(90 + u64::from(id) % 3)); // all already due
    }
    q.schedule(99, ms(500));
    assert!(q.next_due_time().is_some_and(|due| due <= now));
    let first = q.drain_due(now, 4);
    assert_eq!(first.len(), 4);
    let rest = q.drain_due(now, 100);
    assert_eq!(rest.len(), 6);
    assert!(
        first
            .iter()
            .chain(&rest)
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[0].due <= w[1].due)
    );
    assert!(
        first.iter().chain(&rest).all(|e| e.due <= now),
        "never early"
    );
    assert_eq!(q.len(), 1);
    assert_eq!(q.next_due_time(), Some(ms(500)));
}
