//! What the cases share: a store of their own, the topology (the source, and a handler bolt
//! that records every delivery and fails as the case says), and waiting on a condition.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::durable::Durable;
use crate::fate::memory::FixedPolicy;
use crate::store::SqliteStore;
use crate::time::TokioTime;
use crate::topology::{
    Bolt, Config, Emitter, Failure, Spout, Topology, TopologyBuilder, Tuple, Value,
};

/// A store of the case's own (SQLite in a temporary directory) and its durable layer.
pub(crate) struct Stored {
    pub(crate) store: Arc<SqliteStore>,
    pub(crate) durable: Durable,
    _dir: tempfile::TempDir,
}

pub(crate) fn stored() -> Stored {
    let dir = tempfile::tempdir().expect("a temporary directory for the case's store");
    let store = Arc::new(SqliteStore::open(dir.path()).expect("the case's store"));
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        Default::default(),
    );
    Stored {
        store,
        durable,
        _dir: dir,
    }
}

/// One delivery the handler saw: the message's id, biz, key, payload and attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub(crate) id: String,
    pub(crate) biz: String,
    pub(crate) payload: String,
    pub(crate) attempt: i64,
}

/// Every delivery, in the order the handler saw them.
pub(crate) type Seen = Arc<Mutex<Vec<Delivery>>>;

/// How the handler answers a delivery: `Ok`, or the failure.
pub(crate) type Answer = fn(&Delivery) -> Result<(), Failure>;

struct Handler {
    seen: Seen,
    answer: Answer,
    work: Duration,
}

impl Bolt for Handler {
    fn execute(&mut self, tuple: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let text = |name| tuple.str(name).unwrap_or_default().to_owned();
        let payload = tuple
            .field("payload")
            .and_then(Value::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        let d = Delivery {
            id: text("id"),
            biz: text("biz"),
            payload,
            attempt: tuple.int("attempt").unwrap_or(1),
        };
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(d.clone());
        if !self.work.is_zero() {
            std::thread::sleep(self.work);
        }
        (self.answer)(&d)
    }
}

/// The source, then the handler, with `config`.
pub(crate) fn topology(
    source: Box<dyn Spout>,
    config: Config,
    seen: Seen,
    answer: Answer,
    work: Duration,
) -> Topology {
    let source = Mutex::new(Some(source));
    let mut b = TopologyBuilder::new("source-suite");
    b.config(config);
    b.spout("source", 1, move |_| {
        source
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("one spout task")
    });
    b.bolt("handler", 1, move |_| Handler {
        seen: seen.clone(),
        answer,
        work,
    })
    .shuffle("source");
    b.build().expect("the suite's topology")
}

/// Retries after an hour (5 deliveries in all); `POISON` dead-lettered at once, label `L3`.
pub(crate) fn policy() -> FixedPolicy {
    FixedPolicy {
        base_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        give_up_codes: ["POISON".to_string()].into(),
        label: "L3".into(),
        ..FixedPolicy::default()
    }
}

/// Waits until `done` holds, at most `secs` seconds (a generous bound: the cases never time
/// anything, they only wait for what must happen).
pub(crate) async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many deliveries each id had.
pub(crate) fn per_id(seen: &Seen) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for d in seen.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        *n.entry(d.id.clone()).or_default() += 1;
    }
    n
}
