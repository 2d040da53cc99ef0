//! The topology under test: an order spout, a parse bolt and a store bolt, over in-memory,
//! durable or durable-source seams.

use super::*;

// ---- the topology ----

/// The name of the durable source's position in the store.
pub(crate) const SOURCE: &str = "orders";

pub(crate) struct OrderSpout {
    next: u64,
    total: u64,
    biz: Arc<str>,
    payload: Bytes,
    buf: String,
    acked: Arc<AtomicU64>,
    /// Messages dead-lettered.
    dead: Arc<AtomicU64>,
    /// A durable source's committed position: its messages carry their offsets.
    position: Option<SourcePosition>,
    /// The ordering keys the messages carry (`ordered.rs`).
    pub(crate) keys: Keys,
}

/// The ordering keys a bench spout's messages carry.
#[derive(Clone)]
pub(crate) enum Keys {
    /// None.
    None,
    /// Each message its own: the id.
    Distinct,
    /// Message `n` has the `n mod len`th.
    Few(Arc<[Key]>),
}

impl OrderSpout {
    /// A spout of `total` messages with `keys`, counting its fates in `acked` and `dead`.
    pub(crate) fn new(
        total: u64,
        keys: Keys,
        acked: Arc<AtomicU64>,
        dead: Arc<AtomicU64>,
    ) -> OrderSpout {
        OrderSpout {
            next: 0,
            total,
            biz: Arc::from("ORDER"),
            payload: Bytes::from_static(PAYLOAD),
            buf: String::new(),
            acked,
            dead,
            position: None,
            keys,
        }
    }
}

impl OrderSpout {
    /// A message got its fate: a durable source tells its position (the id is its offset).
    fn settled(&mut self, id: &MessageId) {
        if let Some(p) = &mut self.position {
            p.settled(id.as_str().parse().expect("ids are offsets"));
        }
    }
}

impl Spout for OrderSpout {
    fn next(&mut self) -> NextMessage {
        let n = loop {
            if self.next == self.total {
                return NextMessage::Exhausted;
            }
            self.next += 1;
            if !self
                .position
                .as_ref()
                .is_some_and(|p| p.should_skip(self.next))
            {
                break self.next;
            }
        };
        let id = id_for(&mut self.buf, n);
        let mut message = Message::new(id.clone(), self.biz.clone(), self.payload.clone());
        message.key = match &self.keys {
            Keys::None => None,
            Keys::Distinct => Some(Key::from(id)),
            Keys::Few(keys) => Some(keys[(n % keys.len() as u64) as usize].clone()),
        };
        NextMessage::Ready(match &mut self.position {
            Some(p) => {
                p.handing_out(n);
                message.with_offset(n)
            }
            None => message,
        })
    }
    fn ack(&mut self, id: &MessageId) {
        // The spout task recorded the acked fate (through the durable seams) before this.
        self.settled(id);
        self.acked.fetch_add(1, Ordering::Relaxed);
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.settled(id);
        self.dead.fetch_add(1, Ordering::Relaxed);
    }
    fn close(&mut self) {
        if let Some(p) = &mut self.position {
            p.sync();
        }
    }
}

pub(crate) struct ParseBolt(pub(crate) Work);

impl Bolt for ParseBolt {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default();
        let payload = input.bytes("payload").map(|b| &b[..]).unwrap_or_default();
        let (order, amount) = parse(self.0, id, payload);
        let attempt = input.int("attempt").unwrap_or(1);
        out.emit((Value::Int(order as i64), amount, attempt));
        Ok(())
    }
}

pub(crate) struct StoreBolt {
    pub(crate) table: Vec<i64>,
    pub(crate) fail_one_in: u64,
}

impl Bolt for StoreBolt {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let v = input.values();
        let (order, amount, attempt) = (
            v[0].as_int().unwrap_or(0) as u64,
            v[1].as_int().unwrap_or(0),
            v[2].as_int().unwrap_or(1),
        );
        if store(&mut self.table, order, amount, attempt, self.fail_one_in) {
            Ok(())
        } else {
            redis::FAILURES.fetch_add(1, Ordering::Relaxed);
            if attempt == 1 {
                redis::FIRST_FAILURES.fetch_add(1, Ordering::Relaxed);
            }
            Err(Failure::new("DB_LOCK_WAIT", "injected"))
        }
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    if std::env::var("BENCH_RT").as_deref() == Ok("current") {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Where retries (and dead letters) go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retries {
    /// The in-memory seams.
    InMemory,
    /// The durable seams over SQLite; acked fates only for messages that were retried
    /// (`record_every_ack: false`), no offsets, no source position.
    Durable,
    /// A durable source: offsets, a committed source position, and an acked fate for every
    /// message its position does not cover yet (what `rebound run` does).
    DurableEveryAck,
    /// The durable seams over the shared store on Redis (one node, `redis.rs`): every retry
    /// written to the store and claimed back from it, an acked fate for every message.
    Redis,
}

/// One run of the topology (5% failures, in-memory retries); returns (acked, elapsed).
pub(crate) fn run_topology(
    rt: &tokio::runtime::Runtime,
    work: Work,
    max_pending: usize,
) -> (u64, Duration) {
    run_topology_with(rt, work, max_pending, 20, Retries::InMemory)
}

/// One run of the topology; returns (messages acked, elapsed). With durable retries the time
/// runs until the journal has committed everything.
pub(crate) fn run_topology_with(
    rt: &tokio::runtime::Runtime,
    work: Work,
    max_pending: usize,
    fail_one_in: u64,
    retries: Retries,
) -> (u64, Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    rt.block_on(async {
        let acked = Arc::new(AtomicU64::new(0));
        let dead = Arc::new(AtomicU64::new(0));
        let shared = (retries == Retries::Redis).then(redis::connect);
        let durable = (retries != Retries::InMemory).then(|| {
            if let Some(store) = &shared {
                return redis::durable(store);
            }
            let store = SqliteStore::open(dir.path()).expect("store");
            Durable::new(
                Arc::new(store),
                Arc::new(TokioTime::new()),
                DurableOptions {
                    journal: JournalOptions {
                        record_every_ack: retries == Retries::DurableEveryAck,
                        hold: HOLD.unwrap_or(JournalOptions::default().hold),
                        ..JournalOptions::default()
                    },
                    ..DurableOptions::default()
                },
            )
        });
        let position = match (&durable, retries) {
            (Some(d), Retries::DurableEveryAck) => {
                d.recover().expect("recover");
                let p = d
                    .source_position(SOURCE, |n| n.to_string(), [])
                    .expect("source position");
                Some(p)
            }
            _ => None,
        };
        let position = std::sync::Mutex::new(position);
        let mut b = TopologyBuilder::new("bench");
        b.config(Config {
            max_spout_pending: max_pending,
            batch_size: std::env::var("BENCH_BATCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(Config::default().batch_size),
            ..Config::default()
        });
        let spout_acked = acked.clone();
        let spout_dead = dead.clone();
        b.spout(SOURCE, 1, move |_| OrderSpout {
            next: 0,
            total: *MESSAGES,
            biz: Arc::from("ORDER"),
            payload: Bytes::from_static(PAYLOAD),
            buf: String::new(),
            acked: spout_acked.clone(),
            dead: spout_dead.clone(),
            // One task, made once.
            position: position.lock().expect("position").take(),
            keys: Keys::None,
        });
        b.bolt("parse", 1, move |_| ParseBolt(work))
            .output(["order", "amount", "attempt"])
            .shuffle(SOURCE);
        b.bolt("store", 1, move |_| StoreBolt {
            table: vec![0; 4096],
            fail_one_in,
        })
        .shuffle("parse");
        let topology = b.build().expect("valid topology");
        let policy = FixedPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(1),
            ..FixedPolicy::default()
        };
        let seams = match (&durable, super::decisions::POLICY.load(Ordering::Relaxed)) {
            (Some(d), by_rules @ (1 | 2)) => {
                // The decisions variants (decisions.rs): the rule engine, its log off or on.
                let set = rebound_engine::compile(vec![rebound_engine::SourceFile::new(
                    "a.yaml",
                    "a.yaml",
                    super::decisions::RULES,
                )])
                .expect("the bench's rules");
                let handle = Arc::new(rebound_engine::PolicyHandle::new(set));
                let mut rules = rebound_runtime::policy::RulePolicy::new(
                    handle,
                    rebound_runtime::policy::TimeScale::REAL,
                );
                if by_rules == 2 {
                    let mut log = rebound_runtime::release::LogOptions::default();
                    if let Some(sample) = std::env::var("BENCH_LOG_SAMPLE")
                        .ok()
                        .and_then(|v| v.parse().ok())
                    {
                        log.sample = sample;
                    }
                    let release = rebound_runtime::release::Release::new(log);
                    d.log_decisions(&release);
                    rules = rules.with_release(release);
                }
                d.seams(rules)
            }
            (Some(d), _) => d.seams(policy),
            (None, _) => Seams::in_memory().with_policy(policy),
        };
        let start = Instant::now();
        let running = topology.start(seams);
        running.wait_quiescent().await;
        let q = start.elapsed();
        let at_quiescence = acked.load(Ordering::Relaxed) + dead.load(Ordering::Relaxed);
        if shared.is_some() {
            // Quiescence comes early on a shared store (retries wait in Redis): see redis.rs.
            redis::settled(&acked, &dead).await;
        }
        if let Some(d) = &durable {
            d.journal().flush().await;
            if std::env::var("BENCH_DEBUG").is_ok() {
                eprintln!(
                    "quiescent after {q:?} ({at_quiescence} settled), journal flushed after {:?}: {:?}",
                    start.elapsed(),
                    d.journal().stats()
                );
            }
        }
        let elapsed = start.elapsed();
        running.shutdown(Duration::from_secs(5)).await;
        if let (Some(d), Retries::DurableEveryAck) = (&durable, retries) {
            // The spout synced its position when it stopped: everything is covered.
            d.journal().flush().await;
            let committed = d.store().position(SOURCE).expect("position");
            assert_eq!(
                committed,
                Some(*MESSAGES),
                "the source's position covers every message"
            );
        }
        if let (Some(store), Some(d)) = (&shared, &durable) {
            redis::finish(store, d, acked.load(Ordering::Relaxed));
        }
        (acked.load(Ordering::Relaxed), elapsed)
    })
}
