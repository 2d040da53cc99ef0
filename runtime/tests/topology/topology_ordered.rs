//! Ordered keys against their model: random sequences of messages over a few keys, random
//! failures with random retry delays, dead letters, acks that complete out of order, and a
//! small `max_held`. At quiescence every message has exactly one fate, and for every key the
//! deliveries that reached the sink went in source order: no delivery of a message came after
//! a delivery of a later message of its key. Messages of a biz that is not ordered are free.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{FateLog, SharedLog, paused_runtime, quiet_injected_panics};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::topology::*;

/// The messages of one spout task, in source order: (key, ordered biz or not).
#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    tasks: Vec<Vec<(u8, bool)>>,
    fail: f64,
    max_attempts: u32,
    max_held: usize,
    all: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let messages = prop::collection::vec((0u8..4, prop::bool::weighted(0.85)), 5..80);
    (
        any::<u64>(),
        prop::collection::vec(messages, 1..=2),
        0.0f64..0.6,
        2u32..=4,
        prop_oneof![Just(1usize), Just(3), Just(10_000)],
        any::<bool>(),
    )
        .prop_map(
            |(seed, tasks, fail, max_attempts, max_held, all)| Scenario {
                seed,
                tasks,
                fail,
                max_attempts,
                max_held,
                all,
            },
        )
}

/// Hands out its task's messages in order, each with its key, and records its fates.
struct KeyedSpout {
    task: usize,
    plan: Vec<(u8, bool)>,
    next: usize,
    log: SharedLog,
}

fn id_of(task: usize, n: usize) -> String {
    format!("t{task}-{n:03}")
}

impl Spout for KeyedSpout {
    fn next(&mut self) -> NextMessage {
        let Some(&(key, ordered)) = self.plan.get(self.next) else {
            return NextMessage::Exhausted;
        };
        let id = id_of(self.task, self.next);
        self.next += 1;
        self.log.lock().unwrap().handed_out.insert(id.clone());
        let biz = if ordered { "ORDER" } else { "AUDIT" };
        let key = format!("t{}-k{key}", self.task);
        NextMessage::Ready(Message::new(id, biz, "").with_key(key))
    }
    fn ack(&mut self, id: &MessageId) {
        self.log.lock().unwrap().acked(id);
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.log.lock().unwrap().dead_lettered(id);
    }
}

/// Fails a share of its deliveries with a random `retry_after`, and acks the rest after a
/// random pause (so trees complete out of the order they were delivered in). Records every
/// delivery it sees, in order.
struct Sink {
    rng: SmallRng,
    fail: f64,
    deliveries: Arc<Mutex<Vec<String>>>,
}

impl DeferredBolt for Sink {
    fn execute(&mut self, input: PendingTuple) {
        let id = input.tuple().str("id").unwrap_or_default().to_owned();
        self.deliveries.lock().unwrap().push(id);
        if self.rng.random_bool(self.fail) {
            let after = Duration::from_millis(self.rng.random_range(0..40));
            let mut failure = Failure::new("FLAKY", "injected");
            failure.retry_after = Some(after);
            input.fail(failure);
            return;
        }
        let pause = Duration::from_millis(self.rng.random_range(0..15));
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            input.ack();
        });
    }
}

async fn run_scenario(s: Scenario) {
    let log: SharedLog = Arc::new(Mutex::new(FateLog::default()));
    let deliveries = Arc::new(Mutex::new(Vec::new()));
    let mut b = TopologyBuilder::new("ordered");
    b.config(Config {
        message_timeout: Duration::from_secs(5),
        max_spout_pending: 16,
        batch_size: 8,
        ordering: OrderingConfig {
            ordered: if s.all {
                Ordered::All
            } else {
                Ordered::Biz(vec!["ORDER".into()])
            },
            on_dead_letter: OnDeadLetter::Continue,
            max_held: s.max_held,
        },
        ..Config::default()
    });
    let (plans, spout_log) = (s.tasks.clone(), log.clone());
    b.spout("source", s.tasks.len(), move |task| KeyedSpout {
        task: task.index,
        plan: plans[task.index].clone(),
        next: 0,
        log: spout_log.clone(),
    });
    let (seed, fail, seen) = (s.seed, s.fail, deliveries.clone());
    b.bolt("parse", 2, |_| PassOn)
        .output(["id"])
        .shuffle("source");
    b.deferred_bolt("sink", 2, move |task| Sink {
        rng: SmallRng::seed_from_u64(seed ^ task.index as u64),
        fail,
        deliveries: seen.clone(),
    })
    .shuffle("parse");
    let topology = b.build().expect("valid topology");
    let seams = Seams::in_memory().with_policy(FixedPolicy {
        max_attempts: s.max_attempts,
        base_delay: Duration::from_millis(1),
        ..FixedPolicy::default()
    });
    let running = topology.start(seams);
    tokio::time::timeout(Duration::from_secs(3600), running.wait_quiescent())
        .await
        .expect("the topology reaches quiescence");
    let stats = running.stats();
    let report = running.shutdown(Duration::from_secs(10)).await;
    assert!(report.drained);

    let log = log.lock().unwrap();
    let total: usize = s.tasks.iter().map(Vec::len).sum();
    assert_eq!(log.handed_out.len(), total);
    log.assert_one_fate_each();
    assert_eq!((stats.ordered_held, stats.ordered_keys_blocked), (0, 0));

    // Per key, the source position of each delivery at the sink never goes back.
    let mut last: BTreeMap<(usize, u8), usize> = BTreeMap::new();
    for id in deliveries.lock().unwrap().iter() {
        let (task, n) = id[1..].split_once('-').unwrap();
        let (task, n): (usize, usize) = (task.parse().unwrap(), n.parse().unwrap());
        let (key, ordered) = s.tasks[task][n];
        if !(ordered || s.all) {
            continue;
        }
        let previous = last.insert((task, key), n);
        assert!(
            previous.is_none_or(|p| p <= n),
            "key t{task}-k{key}: {id} reached the sink after message {} of its key",
            previous.unwrap_or_default()
        );
    }
}

/// Passes the id on.
struct PassOn;

impl Bolt for PassOn {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        out.emit((input.field("id").cloned().unwrap_or(Value::Null),));
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn each_keys_deliveries_reach_the_sink_in_source_order_and_every_message_has_one_fate(
        s in scenario()
    ) {
        quiet_injected_panics();
        paused_runtime().block_on(run_scenario(s));
    }
}
