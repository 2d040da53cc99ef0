//! The scheduler's honesty, as `/metrics` shows it: each fired retry's lateness (how much
//! later than its due time it went out) and each fate's wait between the acker and its spout
//! task are observed once each.

use std::time::Duration;

use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::topology::*;

/// Hands out `n` messages, then `Exhausted`.
struct Count {
    next: u32,
    n: u32,
}

impl Spout for Count {
    fn next(&mut self) -> NextMessage {
        if self.next == self.n {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        NextMessage::Ready(Message::new(format!("m-{}", self.next), "ORDER", "{}"))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Fails each message's first delivery.
struct FailsOnce;

impl Bolt for FailsOnce {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        match tuple.field("attempt").and_then(Value::as_int) {
            Some(1) => Err(Failure::new("DOWN", "the downstream is down")),
            _ => Ok(()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fired_retry_s_lateness_and_each_fate_s_wait_are_observed() {
    let mut b = TopologyBuilder::new("honesty");
    b.spout("src", 1, |_| Count { next: 0, n: 30 });
    b.bolt("work", 1, |_| FailsOnce).shuffle("src");
    let policy = FixedPolicy {
        base_delay: Duration::from_millis(20),
        ..FixedPolicy::default()
    };
    let running = b
        .build()
        .unwrap()
        .start(Seams::in_memory().with_policy(policy));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while running.stats().acked < 30 {
        assert!(tokio::time::Instant::now() < deadline, "30 acked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.wait_quiescent().await;
    let s = running.stats();
    // 30 retries fired, each observed once; 60 fates (30 failures, 30 acks), each once.
    assert_eq!(s.retry_lateness.count, 30, "{:?}", s.retry_lateness);
    assert_eq!(s.ack_wait.count, 60, "{:?}", s.ack_wait);
    // A retry never fires before its due time: lateness is never "negative" (clamped), and
    // the sum is finite and below the run's length.
    assert!(s.retry_lateness.sum < Duration::from_secs(30 * 30));
    running.shutdown(Duration::from_secs(5)).await;
}
