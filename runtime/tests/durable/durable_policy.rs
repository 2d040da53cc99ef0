//! The rule engine deciding a live topology's failures through the durable seams, with the
//! shipped rules (`rules/` at the workspace root): a `give_up` code is dead-lettered at its
//! first failure under its rule's label, and `RATE_LIMITED` waits at least its `retry_after`
//! (scaled by the time scale). What the store keeps carries the deciding rule and version.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_engine::PolicyHandle;
use rebound_runtime::durable::{Durable, DurableOptions};
use rebound_runtime::fate::GiveUpReason;
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::store::{Fate, SqliteStore, Store};
use rebound_runtime::time::{Timestamp, TokioTime};
use rebound_runtime::topology::*;
use tokio::time::Instant;

fn shipped() -> Arc<PolicyHandle> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let set = rebound_engine::load_dir(&dir).unwrap().unwrap();
    Arc::new(PolicyHandle::new(set))
}

/// A SQLite store in `dir` and the durable seams over it.
fn durable_on(dir: &Path) -> (Arc<SqliteStore>, Durable) {
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        DurableOptions::default(),
    );
    (store, durable)
}

/// The fate the store knows for `id`.
fn fate_of(store: &SqliteStore, id: &str) -> Option<Fate> {
    let fates = store.known_fates(&[MessageId::from(id)]).unwrap();
    fates.into_iter().next().map(|(_, fate)| fate)
}

/// Hands out `ids` and records the fates it is told. (The spout task records them in the
/// store.)
struct Ids {
    ids: Vec<&'static str>,
    told: Arc<Mutex<BTreeMap<String, &'static str>>>,
}

impl Spout for Ids {
    fn next(&mut self) -> NextMessage {
        match self.ids.pop() {
            Some(id) => NextMessage::Ready(Message::new(id, "ORDER", "{}")),
            None => NextMessage::Exhausted,
        }
    }
    fn ack(&mut self, id: &MessageId) {
        self.told.lock().unwrap().insert(id.to_string(), "acked");
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.told.lock().unwrap().insert(id.to_string(), "dead");
    }
}

type Seen = Arc<Mutex<BTreeMap<String, Vec<(i64, Instant)>>>>;

/// `bad-*` is never JSON; `limited-*` is rate limited at its first attempt (retry after 3 s);
/// everything else works.
struct Store429 {
    seen: Seen,
}

impl Bolt for Store429 {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default().to_owned();
        let attempt = input.int("attempt").unwrap_or(0);
        self.seen
            .lock()
            .unwrap()
            .entry(id.clone())
            .or_default()
            .push((attempt, Instant::now()));
        if id.starts_with("bad-") {
            return Err(Failure::new("BAD_JSON", "expected value at line 1"));
        }
        if id.starts_with("limited-") && attempt == 1 {
            return Err(
                Failure::new("RATE_LIMITED", "429").with_retry_after(Duration::from_secs(3))
            );
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_rules_decide_the_topologys_failures() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = durable_on(dir.path());
    let rules = shipped();
    let version = rules.current().version().to_string();
    let scale = TimeScale::new(100.0).unwrap();

    let told: Arc<Mutex<BTreeMap<String, &'static str>>> = Arc::default();
    let seen: Seen = Arc::default();
    let (t2, s2) = (told.clone(), seen.clone());
    let mut b = TopologyBuilder::new("t");
    b.spout("src", 1, move |_| Ids {
        ids: vec!["ok-1", "bad-1", "limited-1", "bad-2", "limited-2", "ok-2"],
        told: t2.clone(),
    });
    b.bolt("store", 1, move |_| Store429 { seen: s2.clone() })
        .shuffle("src");
    let running = b
        .build()
        .unwrap()
        .start(durable.seams(RulePolicy::new(rules, scale)));
    tokio::time::timeout(Duration::from_secs(20), running.wait_quiescent())
        .await
        .unwrap();
    let stats = running.stats();
    running.shutdown(Duration::from_secs(5)).await;
    durable.journal().flush().await;

    let told = told.lock().unwrap().clone();
    assert_eq!(told["bad-1"], "dead");
    assert_eq!(told["bad-2"], "dead");
    for id in ["ok-1", "ok-2", "limited-1", "limited-2"] {
        assert_eq!(told[id], "acked", "{id}");
    }

    // give_up: dead-lettered at the first failure, under bad-payload's label, with its version.
    for id in ["bad-1", "bad-2"] {
        let letter = store
            .dead_letter(&MessageId::from(id))
            .unwrap()
            .unwrap()
            .letter;
        assert_eq!(letter.label.as_str(), "L3");
        assert_eq!(letter.reason, GiveUpReason::GiveUp);
        assert_eq!(letter.rule.as_str(), "bad-payload");
        assert_eq!(letter.version.to_string(), version);
        assert_eq!(letter.message.retry.attempt, 1);
        assert_eq!(letter.failure.code, "BAD_JSON");
        assert_eq!(seen.lock().unwrap()[id].len(), 1, "never retried");
    }

    // RATE_LIMITED: retry_after 3 s of rule time is 30 ms at 100×; the rule's own backoff
    // (1 s base, full jitter: at most 10 ms here) is shorter, so the wait is the retry_after.
    for id in ["limited-1", "limited-2"] {
        let deliveries = seen.lock().unwrap()[id].clone();
        assert_eq!(
            deliveries.iter().map(|d| d.0).collect::<Vec<_>>(),
            [1, 2],
            "{id}"
        );
        let waited = deliveries[1].1 - deliveries[0].1;
        assert!(
            waited >= Duration::from_millis(30),
            "{id} waited {waited:?}"
        );
        assert_eq!(fate_of(&store, id), Some(Fate::Acked), "{id}");
    }
    assert_eq!(stats.retries_by_rule.get("rate-limited"), Some(&2));
    assert_eq!(stats.dead_letters_by_label.get("L3"), Some(&2));
    // Both delays were 30 ms: the (10 ms, 50 ms] bucket of the retry-delay histogram.
    assert_eq!(stats.retry_delay.count, 2);
    assert_eq!(stats.retry_delay.buckets[1], 2);
    assert!(store.scheduled().unwrap().is_empty());
}

/// Rate limited with the largest `retry_after` a client can send (2^64 − 1 ms).
struct LimitedForever;

impl Bolt for LimitedForever {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Err(Failure::new("RATE_LIMITED", "429").with_retry_after(Duration::from_millis(u64::MAX)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_beyond_every_clock_saturates_end_to_end() {
    // At a time scale below 1 the real delay is longer still (2^65 ms): past what a Duration
    // in milliseconds, an Instant or a store column could hold unclamped.
    for scale in [1.0, 0.5] {
        let dir = tempfile::tempdir().unwrap();
        let (store, durable) = durable_on(dir.path());
        let told: Arc<Mutex<BTreeMap<String, &'static str>>> = Arc::default();
        let t2 = told.clone();
        let mut b = TopologyBuilder::new("t");
        b.spout("src", 1, move |_| Ids {
            ids: vec!["forever-1", "forever-2"],
            told: t2.clone(),
        });
        b.bolt("store", 1, |_| LimitedForever).shuffle("src");
        let running = b
            .build()
            .unwrap()
            .start(durable.seams(RulePolicy::new(shipped(), TimeScale::new(scale).unwrap())));
        let store_probe = store.clone();
        tokio::time::timeout(Duration::from_secs(20), async move {
            while store_probe.scheduled().unwrap().len() < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("both retries reach the store");
        let stats = running.stats();
        running.shutdown(Duration::from_secs(5)).await;
        durable.journal().flush().await;
        assert!(durable.journal().failure().is_none(), "scale {scale}");
        assert_eq!(stats.retries_by_rule.get("rate-limited"), Some(&2));
        let scheduled = store.scheduled().unwrap();
        assert_eq!(scheduled.len(), 2, "scale {scale}");
        for (id, due) in scheduled {
            assert_eq!(due, Timestamp::MAX, "{id} at scale {scale}");
        }
        let retries = store.retries(&[MessageId::from("forever-1")]).unwrap();
        assert_eq!(
            retries[0].message.retry.last_delay(),
            rebound_runtime::fate::MAX_RETRY_DELAY,
            "scale {scale}"
        );
        assert!(told.lock().unwrap().is_empty(), "no fate: they wait");
    }
}

/// Hands out `order-1` with the header `tenant: vip` and `order-2` without it.
struct Tenants {
    next: u32,
}

impl Spout for Tenants {
    fn next(&mut self) -> NextMessage {
        self.next += 1;
        match self.next {
            1 => NextMessage::Ready(
                Message::new("order-1", "ORDER", "{}").with_header("tenant", "vip"),
            ),
            2 => NextMessage::Ready(Message::new("order-2", "ORDER", "{}")),
            _ => NextMessage::Exhausted,
        }
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Every delivery fails.
struct AlwaysFails;

impl Bolt for AlwaysFails {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Err(Failure::new("DOWNSTREAM", "down"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_on_a_header_decides_for_the_messages_that_carry_it() {
    // `vip` also checks that the failure's `now` is the wall time (after 2020), not 0.
    let rules = rebound_engine::compile(vec![rebound_engine::SourceFile::new(
        "10-tenants.yaml",
        "10-tenants.yaml",
        "version: 1
rules:
  - id: vip
    match: { headers: { tenant: vip } }
    if: 'now > 1_577_836_800_000 && headers.tenant == \"vip\"'
    give_up: true
    dead_letter: VIP
  - id: others
    give_up: true
    dead_letter: STD
",
    )])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = durable_on(dir.path());
    let mut b = TopologyBuilder::new("t");
    b.spout("src", 1, |_| Tenants { next: 0 });
    b.bolt("work", 1, |_| AlwaysFails).shuffle("src");
    let policy = RulePolicy::new(
        Arc::new(PolicyHandle::new(rules)),
        TimeScale::new(1.0).unwrap(),
    );
    let running = b.build().unwrap().start(durable.seams(policy));
    tokio::time::timeout(Duration::from_secs(20), running.wait_quiescent())
        .await
        .unwrap();
    running.shutdown(Duration::from_secs(5)).await;
    durable.journal().flush().await;

    let letter = |id: &str| {
        store
            .dead_letter(&MessageId::from(id))
            .unwrap()
            .unwrap()
            .letter
    };
    let vip = letter("order-1");
    assert_eq!((vip.rule.as_str(), vip.label.as_str()), ("vip", "VIP"));
    assert_eq!(vip.message.headers.get("tenant"), Some("vip"));
    let other = letter("order-2");
    assert_eq!(
        (other.rule.as_str(), other.label.as_str()),
        ("others", "STD")
    );
}
