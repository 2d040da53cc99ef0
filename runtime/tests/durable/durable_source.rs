//! A durable source with one owner: offsets, a committed position told from `ack` and
//! `dead_lettered`, and the acked fates the position records instead of the store.

use std::sync::Mutex;
use std::time::Duration;

use rebound_runtime::durable::SourcePosition;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::store::{Fate, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::*;

use crate::durable_seams::{give_up_poison, open};

/// A durable source: messages numbered `m-1…m-n` with their offsets, a committed position
/// told from `ack` and `dead_lettered`, synced when the task stops.
struct Positioned {
    next: u64,
    n: u64,
    position: SourcePosition,
}

fn offset_of(id: &MessageId) -> u64 {
    id.as_str()["m-".len()..].parse().unwrap()
}

impl Spout for Positioned {
    fn next(&mut self) -> NextMessage {
        let n = loop {
            if self.next >= self.n {
                return NextMessage::Exhausted;
            }
            self.next += 1;
            if !self.position.should_skip(self.next) {
                break self.next;
            }
        };
        self.position.handing_out(n);
        NextMessage::Ready(Message::new(format!("m-{n}"), "ORDER", "x").with_offset(n))
    }
    fn ack(&mut self, id: &MessageId) {
        self.position.settled(offset_of(id));
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.position.settled(offset_of(id));
    }
    fn close(&mut self) {
        self.position.sync();
    }
}

/// Every 7th message fails its first delivery (a retry row, then its fate); every 50th is
/// poison (a dead letter).
struct SomeFail;

impl Bolt for SomeFail {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let n: u64 = input.str("id").unwrap_or_default()["m-".len()..]
            .parse()
            .unwrap();
        if n.is_multiple_of(50) {
            return Err(Failure::new("POISON", "injected"));
        }
        if n.is_multiple_of(7) && input.int("attempt") == Some(1) {
            return Err(Failure::new("FLAKY", "injected"));
        }
        Ok(())
    }
}

/// What a durable source needs with one owner: its committed position is the record of the
/// acked fates at or below it, so the store keeps none of them (fates stay bounded), only the
/// dead-lettered ones; and a restart hands out nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_positioned_sources_position_is_the_record_of_its_acked_fates() {
    let dir = tempfile::tempdir().unwrap();
    let n = 500;
    {
        let (store, durable) = open(dir.path());
        durable.recover().unwrap();
        let position = durable
            .source_position("src", |n| format!("m-{n}"), [])
            .unwrap();
        let position = Mutex::new(Some(position));
        let mut b = TopologyBuilder::new("t");
        b.spout("src", 1, move |_| Positioned {
            next: 0,
            n,
            position: position.lock().unwrap().take().expect("one task"),
        });
        b.bolt("work", 1, |_| SomeFail).shuffle("src");
        let policy = FixedPolicy {
            base_delay: Duration::from_millis(1),
            ..give_up_poison()
        };
        let running = b.build().unwrap().start(durable.seams(policy));
        tokio::time::timeout(Duration::from_secs(30), running.wait_quiescent())
            .await
            .expect("every message gets its fate");
        let stats = running.stats();
        running.shutdown(Duration::from_secs(5)).await;
        durable.journal().flush().await;
        assert_eq!((stats.acked, stats.dead_lettered), (n - n / 50, n / 50));
        assert_eq!(
            stats.retries,
            (1..=n).filter(|i| i % 7 == 0 && i % 50 != 0).count() as u64
        );

        assert_eq!(store.position("src").unwrap(), Some(n));
        assert!(store.scheduled().unwrap().is_empty());
        let ids: Vec<MessageId> = (1..=n).map(|i| MessageId::from(format!("m-{i}"))).collect();
        let fates = store.known_fates(&ids).unwrap();
        let expected: Vec<(MessageId, Fate)> = (1..=n)
            .filter(|i| i % 50 == 0)
            .map(|i| (MessageId::from(format!("m-{i}")), Fate::DeadLettered))
            .collect();
        assert_eq!(fates, expected, "only the dead-lettered fates are kept");
        // (Whether the journal wrote them and the position pruned them, or never wrote those the
        // position already covered, depends on how the batches fell: not asserted.)
    }
    // A restart resumes after the position: nothing is handed out again.
    let (_, durable) = open(dir.path());
    assert!(durable.recover().unwrap().is_empty());
    let position = durable
        .source_position("src", |n| format!("m-{n}"), [])
        .unwrap();
    assert_eq!(position.committed(), n);
    assert!((1..=n).all(|i| position.should_skip(i)));
    assert!(!position.should_skip(n + 1));
}

/// A source that waits on a position whose fate it never hears of (another node that held the
/// source settled it, and its committed position pruned the fate) goes on once it learns the
/// store's position: what lies at or below it is settled, what it knew above it stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_committed_elsewhere_settles_what_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    durable.recover().unwrap();
    let mut position = durable
        .source_position("src", |n| format!("m-{n}"), [])
        .unwrap();
    for k in 1..=20 {
        position.handing_out(k);
    }
    // 1–3 settle here, 4 never does (its fate went elsewhere), 5–9 and 12 settle here.
    for k in (1..=3).chain(5..=9).chain([12]) {
        position.settled(k);
    }
    assert_eq!(position.committed(), 3);
    assert_eq!(position.unsettled(100)[..3], [4, 10, 11]);
    // The store says everything up to 6 has its fate: the mark moves past 4 and on through
    // what it knew settled above (7–9), and waits at 10.
    assert!(position.settled_through(6));
    assert_eq!(position.committed(), 9);
    assert_eq!(position.settled_above(), 1, "12 is still known settled");
    assert_eq!(position.unsettled(3), [10, 11, 13]);
    assert!((1..=9).all(|k| position.should_skip(k)));
    // A position behind the mark says nothing new.
    assert!(!position.settled_through(5));
    // Past what it handed out, as another node committed it: nothing above the store's
    // position is known settled.
    store
        .apply(&[WriteOp::Position {
            source: "src".into(),
            position: 30,
            at: Timestamp::from_millis(1),
        }])
        .unwrap();
    assert!(position.settled_through(30));
    assert_eq!((position.committed(), position.settled_above()), (30, 0));
    assert!(position.unsettled(10).is_empty());
    position.sync();
    durable.journal().flush().await;
    assert_eq!(store.position("src").unwrap(), Some(30));
    // What settles above it is written as ever.
    position.handing_out(31);
    assert!(position.settled(31));
    position.sync();
    durable.journal().flush().await;
    assert_eq!(store.position("src").unwrap(), Some(31));
}
