//! Fairness between due retries and new messages, and the retry fuse (the breaker for
//! everything).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{CountingSpout, FateLog, SharedLog, paused_runtime};
use rebound_runtime::fate::memory::{FixedPolicy, MemoryRetryQueue};
use rebound_runtime::fate::{RetryQueue, Seams};
use rebound_runtime::topology::*;
use tokio::time::Instant;

/// Records the attempt number of every root tuple it sees, in order.
struct Recorder {
    seen: Arc<Mutex<Vec<(Instant, i64)>>>,
    fail_until: Option<Arc<AtomicBool>>,
}

impl Bolt for Recorder {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let attempt = input.int("attempt").unwrap_or(0);
        self.seen.lock().unwrap().push((Instant::now(), attempt));
        let failing = self.fail_until.as_ref();
        if failing.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(Failure::new("DOWN", "the downstream is down"));
        }
        Ok(())
    }
}

/// A retry queue pre-filled with `n` messages that are due now (each already delivered once).
fn prefilled(n: usize, log: SharedLog) -> impl Fn(&TaskInfo) -> Box<dyn RetryQueue> + Send + Sync {
    move |_| {
        let mut q = MemoryRetryQueue::new();
        let now = Instant::now();
        for i in 0..n {
            let id = format!("retry-{i}");
            log.lock().unwrap().handed_out.insert(id.clone());
            let mut m = Message::new(id, "ORDER", "x");
            m.retry.attempt = 1;
            q.schedule(now, m);
        }
        Box::new(q)
    }
}

/// Runs one spout task with `new` new messages and `retries` due retries through one bolt, and
/// returns the order of deliveries as a string of `N` (new) and `R` (retry).
fn delivery_order(new: u64, retries: usize, retries_per_new: u32) -> String {
    paused_runtime().block_on(async move {
        let log: SharedLog = Arc::new(Mutex::new(FateLog::default()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut b = TopologyBuilder::new("mix");
        b.config(Config {
            max_spout_pending: 50,
            retry_mix: RetryMix { retries_per_new },
            ..Config::default()
        });
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("new", new, spout_log.clone())
        });
        let bolt_seen = seen.clone();
        b.bolt("record", 1, move |_| Recorder {
            seen: bolt_seen.clone(),
            fail_until: None,
        })
        .shuffle("source");
        let seams = Seams::in_memory().with_retry_queues(prefilled(retries, log.clone()));
        let running = b.build().unwrap().start(seams);
        running.wait_quiescent().await;
        running.shutdown(Duration::from_secs(5)).await;
        log.lock().unwrap().assert_one_fate_each();
        let seen = seen.lock().unwrap();
        seen.iter()
            .map(|(_, attempt)| if *attempt == 1 { 'N' } else { 'R' })
            .collect()
    })
}

#[test]
fn a_full_retry_queue_leaves_new_messages_their_share() {
    // 300 due retries and 1000 new messages: while both are available, exactly 3 retries per
    // new message; the retries do not shut new data out.
    let order = delivery_order(1000, 300, 3);
    assert_eq!(order.len(), 1300);
    assert_eq!(&order[..400], "RRRN".repeat(100));
    assert!(order[400..].chars().all(|c| c == 'N'));
}

#[test]
fn a_flood_of_new_messages_does_not_starve_retries() {
    // 30 due retries behind 100 000 new messages: all retries go out within the first 40
    // deliveries.
    let order = delivery_order(100_000, 30, 3);
    assert_eq!(order.len(), 100_030);
    assert_eq!(order[..40].chars().filter(|c| *c == 'R').count(), 30);
    assert_eq!(&order[..40], "RRRN".repeat(10));
}

#[test]
fn the_ratio_is_configurable() {
    let order = delivery_order(100, 20, 1);
    assert_eq!(&order[..40], "RN".repeat(20));
    let order = delivery_order(50, 20, 0);
    assert_eq!(&order[..50], "N".repeat(50), "0 means new messages first");
    assert_eq!(&order[50..], "R".repeat(20));
}

/// Emits one new message every 10 ms of (virtual) time.
struct PacedSpout {
    inner: CountingSpout,
    next_at: Instant,
}

impl Spout for PacedSpout {
    fn next(&mut self) -> NextMessage {
        let now = Instant::now();
        if now < self.next_at {
            return NextMessage::Idle;
        }
        self.next_at = now + Duration::from_millis(10);
        self.inner.next()
    }
    fn ack(&mut self, id: &MessageId) {
        self.inner.ack(id)
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.inner.dead_lettered(id)
    }
}

#[test]
fn the_fuse_holds_retries_while_failing_and_releases_them_after() {
    paused_runtime().block_on(async {
        let log: SharedLog = Arc::new(Mutex::new(FateLog::default()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let failing = Arc::new(AtomicBool::new(true));
        let mut b = TopologyBuilder::new("fuse");
        b.config(Config {
            fuse: FuseConfig {
                enabled: true,
                window: Duration::from_secs(1),
                threshold: 0.5,
                min_samples: 10,
            },
            ..Config::default()
        });
        let spout_log = log.clone();
        b.spout("source", 1, move |_| PacedSpout {
            inner: CountingSpout::new("m", 400, spout_log.clone()),
            next_at: Instant::now(),
        });
        let (bolt_seen, bolt_failing) = (seen.clone(), failing.clone());
        b.bolt("flaky", 1, move |_| Recorder {
            seen: bolt_seen.clone(),
            fail_until: Some(bolt_failing.clone()),
        })
        .shuffle("source");
        let seams = Seams::in_memory().with_policy(FixedPolicy {
            max_attempts: 1000,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(10),
            ..FixedPolicy::default()
        });
        let start = Instant::now();
        let running = b.build().unwrap().start(seams);

        // The fuse judges from the end of its first window (1 s) on.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let during = running.stats();
        assert!(during.fuse_open, "the fuse is open while everything fails");
        assert!(
            during.retry_queue_depth > 50,
            "retries are held: {during:?}"
        );
        let emitted_then = during.emitted;

        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            running.stats().emitted > emitted_then + 50,
            "new messages keep flowing"
        );
        failing.store(false, Ordering::Relaxed);

        running.wait_quiescent().await;
        // The fuse is a breaker: after the last failures it stays open half a window and
        // ramps over the other half before it closes.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let end = running.stats();
        running.shutdown(Duration::from_secs(5)).await;
        assert!(!end.fuse_open, "{end:?}");
        assert_eq!(end.dead_lettered, 0);
        assert_eq!(end.acked, 400, "every held retry was delivered in the end");
        log.lock().unwrap().assert_one_fate_each();

        // While everything failed (from well after its first window until the downstream
        // recovered at 2.5 s) few retries were delivered: open, none; each time it turned
        // half-open (every half window) a tenth of the held ones went through, and their
        // failures opened it again at once. New messages kept flowing.
        let seen = seen.lock().unwrap();
        let open_window = start + Duration::from_millis(1200)..start + Duration::from_millis(2500);
        let retries_while_open = seen
            .iter()
            .filter(|(at, attempt)| open_window.contains(at) && *attempt > 1)
            .count();
        let new_while_open = seen
            .iter()
            .filter(|(at, attempt)| open_window.contains(at) && *attempt == 1)
            .count();
        assert!(
            retries_while_open * 3 <= new_while_open,
            "{retries_while_open} retries against {new_while_open} new messages while open"
        );
        assert!(
            new_while_open >= 100,
            "{new_while_open} new messages while open"
        );
    });
}
