//! Retries on the shared store: the durable seams over a [`RedisStore`] on a redis-server of
//! the bench's own ([`TestServer`], `appendonly yes`, `appendfsync always`), started once per
//! bench process, one fresh namespace per run.
//!
//! On a shared store a retry is not fired from the spout task's own queue: its `Schedule` is
//! written to the store's due set, and the node's claimer claims it when due (nudged by the
//! local schedule, at least every 250 ms) and hands it to the spout task. So the topology's
//! quiescence (nothing in flight, nothing in the retry queue) comes early: the
//! `SharedRetryQueue` counts only what was claimed for this node, not the retries waiting in
//! Redis. A Redis run is therefore timed until every message is acked or dead-lettered (the
//! spout's own counters), and then until the journal has committed everything; the store's
//! depth is then checked to be empty.
//!
//! Per run, from the server's `INFO commandstats` (reset before the run) and the bench's own
//! counters: round trips, and store operations (one `WriteOp` or one claimed retry) per message.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::sync::Mutex;

use rebound_runtime::durable::{ClaimStats, SharedOptions};
use rebound_runtime::store::ClaimQueue;
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

use super::*;

/// The bench's redis-server, started on first use; it dies with the bench process.
static SERVER: LazyLock<TestServer> = LazyLock::new(TestServer::start);

/// Namespaces used so far (each run takes a fresh one).
static NAMESPACES: AtomicU64 = AtomicU64::new(0);

/// What the store bolt failed in the current run: every failure (a `Schedule`, or a dead
/// letter), and first failures (messages retried at least once).
pub(crate) static FAILURES: AtomicU64 = AtomicU64::new(0);
pub(crate) static FIRST_FAILURES: AtomicU64 = AtomicU64::new(0);

/// The counts of the last Redis run.
pub(crate) static LAST: Mutex<Option<RedisCounts>> = Mutex::new(None);

/// A fresh namespace on the bench's server, its commandstats reset.
pub(crate) fn connect() -> RedisStore {
    let n = NAMESPACES.fetch_add(1, Ordering::Relaxed);
    let store = RedisStore::connect(&RedisOptions::new(SERVER.url(), format!("bench-{n}")))
        .expect("a connection to the bench's redis-server");
    let _: () = ::redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut SERVER.client())
        .expect("CONFIG RESETSTAT");
    FAILURES.store(0, Ordering::Relaxed);
    FIRST_FAILURES.store(0, Ordering::Relaxed);
    CPU_BEFORE.store(redis_cpu().to_bits(), Ordering::Relaxed);
    store
}

/// The server's CPU (`used_cpu_user` + `used_cpu_sys`) when the run began, as f64 bits.
static CPU_BEFORE: AtomicU64 = AtomicU64::new(0);

/// The server's CPU time so far, in seconds (`INFO cpu`: user + sys).
pub(crate) fn redis_cpu() -> f64 {
    let info: String = ::redis::cmd("INFO")
        .arg("cpu")
        .query(&mut SERVER.client())
        .expect("INFO cpu");
    info.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k, "used_cpu_user" | "used_cpu_sys").then(|| v.trim().parse::<f64>().ok())?
        })
        .sum()
}

/// Durable seams over `store`, shared-store style (one node).
pub(crate) fn durable(store: &RedisStore) -> Durable {
    let store = Arc::new(store.clone());
    Durable::shared(
        store.clone(),
        store,
        Arc::new(TokioTime::new()),
        DurableOptions {
            journal: JournalOptions {
                // As the SQLite variant it is compared with: only messages that were retried
                // get an acked fate (`BENCH_REDIS_EVERY_ACK=1`: every message, as a fleet's
                // bundled run records them).
                record_every_ack: std::env::var("BENCH_REDIS_EVERY_ACK").is_ok(),
                hold: HOLD.unwrap_or(JournalOptions::default().hold),
                ..JournalOptions::default()
            },
            ..DurableOptions::default()
        },
        SharedOptions::new("bench", Duration::from_secs(10)),
    )
}

/// Waits until every message is acked or dead-lettered (see the module docs).
pub(crate) async fn settled(acked: &AtomicU64, dead: &AtomicU64) {
    while acked.load(Ordering::Relaxed) + dead.load(Ordering::Relaxed) < *MESSAGES {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One command's line of `INFO commandstats`: calls and microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cmd {
    pub calls: u64,
    pub usec: u64,
}

/// What one Redis run cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct RedisCounts {
    /// Messages acked.
    pub acked: u64,
    /// The store's own count of round trips (each script call, command or pipeline is one).
    pub round_trips: u64,
    /// The server's commandstats (the bench's own INFO and CONFIG calls left out).
    pub commands: BTreeMap<String, Cmd>,
    /// Writes the journal sent to the store (committed, not moot).
    pub written: u64,
    /// Failures in the store bolt (each one `Schedule` or dead letter).
    pub failures: u64,
    /// Messages that failed at least once.
    pub retried: u64,
    /// The claimer's counters.
    pub claims: ClaimStats,
    /// The server's CPU time during the run (user + sys), seconds.
    pub cpu: f64,
}

impl RedisCounts {
    /// Script calls (EVALSHA and EVAL).
    pub fn scripts(&self) -> u64 {
        ["evalsha", "eval"]
            .iter()
            .filter_map(|c| self.commands.get(*c))
            .map(|c| c.calls)
            .sum()
    }

    /// The server's time in scripts (their commands included), µs.
    pub fn script_usec(&self) -> u64 {
        ["evalsha", "eval"]
            .iter()
            .filter_map(|c| self.commands.get(*c))
            .map(|c| c.usec)
            .sum()
    }

    /// Store operations of retried messages: the writes (their schedules and fates; with
    /// `record_every_ack` off nothing else is written) and the claims. A retry fired from
    /// memory within the hold costs none.
    pub fn retried_ops(&self) -> u64 {
        self.written + self.claims.claimed
    }

    pub fn summary(&self) -> String {
        let per = |x: u64| x as f64 / self.acked.max(1) as f64;
        let others: Vec<String> = self
            .commands
            .iter()
            .filter(|(c, _)| !matches!(c.as_str(), "evalsha" | "eval"))
            .map(|(c, s)| format!("{c} {}", s.calls))
            .collect();
        let inner: u64 = self
            .commands
            .iter()
            .filter(|(c, _)| !matches!(c.as_str(), "evalsha" | "eval" | "zcard" | "script|load"))
            .map(|(_, s)| s.calls)
            .sum();
        format!(
            "{} round trips ({:.4}/acked message; server: {} scripts, commands: {}), \
             {} writes + {} claims ({:.3} ops/acked message); {} retried messages, {} failures: \
             {:.2} store ops per retried message, {:.2} per retry claimed back; in scripts {:.0} ms ({:.2} µs and \
             {:.2} commands per message), Redis CPU {:.0} ms ({:.2} µs/message)",
            self.round_trips,
            per(self.round_trips),
            self.scripts(),
            if others.is_empty() {
                "none".to_owned()
            } else {
                others.join(", ")
            },
            self.written,
            self.claims.claimed,
            per(self.written + self.claims.claimed),
            self.retried,
            self.failures,
            self.retried_ops() as f64 / self.retried.max(1) as f64,
            self.retried_ops() as f64 / self.claims.claimed.max(1) as f64,
            self.script_usec() as f64 / 1000.0,
            per(self.script_usec()),
            per(inner),
            self.cpu * 1000.0,
            self.cpu * 1e6 / self.acked.max(1) as f64,
        )
    }
}

/// The server's commandstats now, without the bench's own INFO and CONFIG calls.
fn commandstats() -> BTreeMap<String, Cmd> {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut SERVER.client())
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |k: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0) as u64
            };
            let cmd = Cmd {
                calls: field("calls"),
                usec: field("usec"),
            };
            (!matches!(name, "info" | "config")).then(|| (name.to_owned(), cmd))
        })
        .collect()
}

/// After a run: checks that the store holds no retry, and records what the run cost.
pub(crate) fn finish(store: &RedisStore, durable: &Durable, acked: u64) {
    let depth = store.depth().expect("the store's depth");
    assert_eq!(
        depth,
        (0, 0),
        "every retry settled: none due, none in flight"
    );
    let stats = durable.journal().stats();
    let counts = RedisCounts {
        acked,
        round_trips: store.round_trips(),
        commands: commandstats(),
        written: stats.committed - stats.moot,
        failures: FAILURES.load(Ordering::Relaxed),
        retried: FIRST_FAILURES.load(Ordering::Relaxed),
        claims: durable.claim_stats().unwrap_or_default(),
        cpu: redis_cpu() - f64::from_bits(CPU_BEFORE.load(Ordering::Relaxed)),
    };
    if std::env::var("BENCH_DEBUG").is_ok() {
        eprintln!("redis: {}", counts.summary());
    }
    *LAST.lock().expect("last counts") = Some(counts);
}

/// The counts of the last Redis run.
pub(crate) fn last() -> RedisCounts {
    LAST.lock()
        .expect("last counts")
        .clone()
        .expect("a Redis run")
}
