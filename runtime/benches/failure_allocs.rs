//! Heap allocations per failure: what one failed delivery costs on its way from the bolt's `Err`
//! through the rule engine's decision to the retry queue (and, durable, to the journal's write
//! op), and back out as a redelivery.
//!
//! ```sh
//! cargo bench -p rebound-runtime --bench failure_allocs
//! ```
//!
//! Two runs of the same topology over the same N messages, counted by a wrapping allocator:
//! one where no message fails, one where every message fails once (attempt 1, a structured
//! rule retries it after 1 ms) and is then acked. The difference divided by N is the cost of
//! one failure. Run for the in-memory seams and for the durable ones over SQLite.
#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use rebound_engine::{PolicyHandle, SourceFile, compile};
use rebound_runtime::durable::{Durable, DurableOptions, JournalOptions};
use rebound_runtime::fate::Seams;
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::store::SqliteStore;
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 3, backoff: { fixed: 1s } }
  dead_letter: L2
rules:
  - id: db-lock
    match: { biz: ORDER, code: DB_LOCK_WAIT }
    retry: { max_retries: 5, backoff: { fixed: 1ms } }
    dead_letter: L2
";

struct Numbers {
    next: u64,
    total: u64,
    biz: Arc<str>,
}

impl Spout for Numbers {
    fn next(&mut self) -> NextMessage {
        if self.next == self.total {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        let id = format!("order-{:07}", self.next);
        NextMessage::Ready(Message::new(id, self.biz.clone(), &b"{}"[..]).with_offset(self.next))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Fails every tuple's first attempt when `fail` is set.
struct Store {
    fail: bool,
}

impl Bolt for Store {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        if self.fail && input.int("attempt") == Some(1) {
            return Err(
                Failure::new("DB_LOCK_WAIT", "lock wait timeout").with_attr("table", "orders")
            );
        }
        Ok(())
    }
}

/// Allocations of one run of `n` messages.
fn run(rt: &tokio::runtime::Runtime, n: u64, fail: bool, durable: bool) -> u64 {
    let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", RULES)]).expect("rules");
    let policy = RulePolicy::new(Arc::new(PolicyHandle::new(set)), TimeScale::REAL);
    let dir = tempfile::tempdir().expect("temp dir");
    rt.block_on(async {
        let durable = durable.then(|| {
            let store = Arc::new(SqliteStore::open(dir.path()).expect("store"));
            let options = DurableOptions {
                journal: JournalOptions {
                    record_every_ack: false,
                    ..JournalOptions::default()
                },
                ..DurableOptions::default()
            };
            Durable::new(store, Arc::new(TokioTime::new()), options)
        });
        let seams = match &durable {
            Some(d) => d.seams(policy),
            None => Seams::in_memory().with_policy(policy),
        };
        let mut b = TopologyBuilder::new("allocs");
        b.config(Config {
            max_spout_pending: 1000,
            ..Config::default()
        });
        let biz: Arc<str> = "ORDER".into();
        let spout = std::sync::Mutex::new(Some(Numbers {
            next: 0,
            total: n,
            biz,
        }));
        b.spout("orders", 1, move |_| {
            spout.lock().unwrap().take().expect("one task")
        });
        b.bolt("store", 1, move |_| Store { fail })
            .shuffle("orders");
        let topology = b.build().expect("topology");
        let before = ALLOCS.load(Relaxed);
        let running = topology.start(seams);
        running.wait_quiescent().await;
        running.shutdown(Duration::from_secs(5)).await;
        if let Some(d) = &durable {
            d.journal().flush().await;
        }
        ALLOCS.load(Relaxed) - before
    })
}

fn main() {
    let n: u64 = std::env::var("BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    for (name, durable) in [("in-memory", false), ("durable", true)] {
        // Median of three of each, to damp tokio's own variation.
        let mut per = Vec::new();
        for _ in 0..3 {
            let clean = run(&rt, n, false, durable);
            let failing = run(&rt, n, true, durable);
            per.push(failing.saturating_sub(clean) as f64 / n as f64);
        }
        per.sort_by(f64::total_cmp);
        println!(
            "{name:>10}: {:.1} allocations per failure ({n} messages)",
            per[1]
        );
    }
}
