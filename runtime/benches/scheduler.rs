//! Retry scheduler and store benchmarks, each against baselines in the same run.
//!
//! `cargo bench -p rebound-runtime --bench scheduler`
//!
//! 1. **Scheduler, 1M entries.** Insert 1,000,000 `u64` ids with due times spread over one
//!    minute at millisecond resolution (≈17 entries share each due time), then expire them all,
//!    advancing time 1 ms at a time. Compared: `RetryScheduler`, `tokio_util`'s `DelayQueue`
//!    (on tokio's paused clock, driven the way it is meant to be: `poll_expired` until empty,
//!    the runtime auto-advancing to each next deadline), a bare `BinaryHeap<(due, seq, id)>`
//!    (no cancel at all: the floor), and two rejected designs: `BTreeMap<(due, seq), id>` plus
//!    a `HashMap` for cancel, and a slab plus a heap with lazy deletion and generations.
//!    Throughput counts one insert and one expiry per entry (2M elements per iteration).
//!    Before criterion runs, a summary table prints one timed run and the bytes per entry of
//!    each, measured by a counting global allocator right after the inserts.
//! 2. **Store.** Scheduled retries and dead letters written per second through
//!    `SqliteStore::apply` in WAL mode, batched (1000 per transaction) and unbatched (1 per
//!    transaction), with `synchronous=FULL` (the default) and `NORMAL`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::scheduler::RetryScheduler;
use rebound_runtime::store::{
    DeadLetter, Message, MessageId, ScheduledRetry, SqliteOptions, SqliteStore, Store, Synchronous,
    WriteOp,
};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};

// ---- a counting allocator, for bytes per entry -------------------------------------------

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` unchanged and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

// ---- the workload --------------------------------------------------------------------------

const N: usize = 1_000_000;
const SPREAD_MS: u64 = 60_000;
const BASE_MS: u64 = 1_700_000_000_000;

/// Due offsets (ms from BASE) for ids 0..N, from a fixed xorshift so every run is identical.
fn workload() -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..N)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % SPREAD_MS
        })
        .collect()
}

/// What each contender must do: insert everything, then expire everything as time advances
/// 1 ms at a time. Returns the number expired (checked to be N). `mem` is called right after
/// the inserts, while everything is still held.
trait Contender {
    const NAME: &'static str;
    fn run(dues: &[u64], mem: &mut dyn FnMut()) -> usize;
}

struct Rebound;
impl Contender for Rebound {
    const NAME: &'static str = "rebound_scheduler";
    fn run(dues: &[u64], mem: &mut dyn FnMut()) -> usize {
        let mut q = RetryScheduler::new();
        for (id, &d) in dues.iter().enumerate() {
            q.schedule(id as u64, Timestamp::from_millis(BASE_MS + d));
        }
        mem();
        let mut out = Vec::with_capacity(4096);
        let mut n = 0;
        for t in 0..=SPREAD_MS {
            out.clear();
            n += q.drain_due_into(Timestamp::from_millis(BASE_MS + t), usize::MAX, &mut out);
            black_box(&out);
        }
        n
    }
}

struct Heap;
impl Contender for Heap {
    const NAME: &'static str = "binary_heap_baseline";
    fn run(dues: &[u64], mem: &mut dyn FnMut()) -> usize {
        let mut q = BinaryHeap::new();
        for (id, &d) in dues.iter().enumerate() {
            q.push(Reverse((BASE_MS + d, id as u64, id as u64)));
        }
        mem();
        let mut out = Vec::with_capacity(4096);
        let mut n = 0;
        for t in 0..=SPREAD_MS {
            out.clear();
            while let Some(&Reverse((due, _, id))) = q.peek() {
                if due > BASE_MS + t {
                    break;
                }
                q.pop();
                out.push((id, due));
            }
            n += out.len();
            black_box(&out);
        }
        n
    }
}

struct TokioDelayQueue;
impl Contender for TokioDelayQueue {
    const NAME: &'static str = "tokio_util_delay_queue";
    fn run(dues: &[u64], mem: &mut dyn FnMut()) -> usize {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("tokio runtime");
        rt.block_on(async {
            let mut q = tokio_util::time::DelayQueue::with_capacity(0);
            let start = tokio::time::Instant::now();
            for (id, &d) in dues.iter().enumerate() {
                q.insert_at(id as u64, start + Duration::from_millis(d));
            }
            mem();
            let mut n = 0;
            while let Some(e) = std::future::poll_fn(|cx| q.poll_expired(cx)).await {
                black_box(e.into_inner());
                n += 1;
            }
            n
        })
    }
}

struct BTreeCandidate;
impl Contender for BTreeCandidate {
    const NAME: &'static str = "btreemap_plus_hashmap";
    fn run(dues: &[u64], mem: &mut dyn FnMut()) -> usize {
        let mut order: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let mut by_id: hashbrown::HashMap<u64, (u64, u64)> = hashbrown::HashMap::new();
        for (id, &d) in dues.iter().enumerate() {
            let key = (BASE_MS + d, id as u64);
            order.insert(key, id as u64);
            by_id.insert(id as u64, key);
        }
        mem();
        let mut out = Vec::with_capacity(4096);
        let mut n = 0;
        for t in 0..=SPREAD_MS {
            out.clear();
            while let Some(e) = order.first_entry() {
                if e.key().0 > BASE_MS + t {
                    break;
                }
                let ((due, _), id) = e.remove_entry();
                by_id.remove(&id);
                out.push((id, due));
            }
            n += out.len();
            black_box(&out);
        }
        n
    }
}

struct SlabHeapCandidate;
impl Contender for SlabHeapCandidate {
    const NAME: &'static str = "slab_heap_generations";
    fn run(dues: &[u64], mem: &mut dyn FnMut()) -> usize {
        // slot → (id, generation, live); heap of (due, seq, slot, generation); id → slot.
        let mut slab: Vec<(u64, u32, bool)> = Vec::new();
        let mut heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>> = BinaryHeap::new();
        let mut index: hashbrown::HashMap<u64, u32> = hashbrown::HashMap::new();
        for (id, &d) in dues.iter().enumerate() {
            let slot = slab.len() as u32;
            slab.push((id as u64, 0, true));
            index.insert(id as u64, slot);
            heap.push(Reverse((BASE_MS + d, id as u64, slot, 0)));
        }
        mem();
        let mut out = Vec::with_capacity(4096);
        let mut n = 0;
        for t in 0..=SPREAD_MS {
            out.clear();
            while let Some(&Reverse((due, _, slot, generation))) = heap.peek() {
                if due > BASE_MS + t {
                    break;
                }
                heap.pop();
                let entry = &mut slab[slot as usize];
                if entry.2 && entry.1 == generation {
                    entry.2 = false;
                    entry.1 += 1;
                    index.remove(&entry.0);
                    out.push((entry.0, due));
                }
            }
            n += out.len();
            black_box(&out);
        }
        n
    }
}

/// CPU time of this thread, from `/proc/thread-self/schedstat` (nanoseconds on CPU), so the
/// numbers hold on a machine shared with compilers; wall time where that file is missing.
fn cpu_time() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(Duration::from_nanos)
        .unwrap_or_else(|| START.get_or_init(Instant::now).elapsed())
}

/// Runs `C` once; returns the CPU time it took.
fn timed<C: Contender>(dues: &[u64], mem: &mut dyn FnMut()) -> Duration {
    let t = cpu_time();
    let n = C::run(dues, mem);
    let took = cpu_time() - t;
    assert_eq!(n, N, "{} expired {n} of {N}", C::NAME);
    took
}

/// Best of three runs, and the memory measured after the inserts: (seconds, bytes per entry).
fn measure<C: Contender>(dues: &[u64]) -> (f64, f64) {
    let before = live_bytes();
    let mut held = 0isize;
    let best = (0..3)
        .map(|_| timed::<C>(dues, &mut || held = live_bytes() - before))
        .min()
        .unwrap_or_default();
    (best.as_secs_f64(), held as f64 / N as f64)
}

/// Criterion measures CPU time too (see [`cpu_time`]).
fn bench_contender<C: Contender>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    dues: &[u64],
) {
    g.bench_function(C::NAME, |b| {
        b.iter_custom(|iters| (0..iters).map(|_| timed::<C>(dues, &mut || {})).sum())
    });
}

fn summary(dues: &[u64]) {
    if let Ok(only) = std::env::var("REBOUND_BENCH_ONLY") {
        // For profiling one contender: `REBOUND_BENCH_ONLY=rebound perf record …`.
        for _ in 0..5 {
            match only.as_str() {
                "rebound" => timed::<Rebound>(dues, &mut || {}),
                "heap" => timed::<Heap>(dues, &mut || {}),
                _ => timed::<TokioDelayQueue>(dues, &mut || {}),
            };
        }
        return;
    }
    eprintln!(
        "\n== scheduler summary: {N} entries over {SPREAD_MS} ms, insert then expire (best of 3, CPU time)"
    );
    eprintln!(
        "{:<26} {:>9} {:>12} {:>12} {:>18}",
        "contender", "cpu secs", "Mops/s", "bytes/entry", "beyond the u64 id"
    );
    let rows = [
        (Rebound::NAME, measure::<Rebound>(dues)),
        (Heap::NAME, measure::<Heap>(dues)),
        (TokioDelayQueue::NAME, measure::<TokioDelayQueue>(dues)),
        (BTreeCandidate::NAME, measure::<BTreeCandidate>(dues)),
        (SlabHeapCandidate::NAME, measure::<SlabHeapCandidate>(dues)),
    ];
    for (name, (secs, bytes)) in rows {
        eprintln!(
            "{name:<26} {secs:>9.3} {:>12.2} {bytes:>12.1} {:>18.1}",
            2.0 * N as f64 / secs / 1e6,
            bytes - 8.0
        );
    }
    // The runtime's id type: a String message id. Its bytes are allocated before the
    // measurement starts and moved in, so the delta is the scheduler's own cost, including
    // the 24-byte String header stored in each node.
    let mut ids: Vec<MessageId> = (0..N)
        .map(|i| MessageId::from(format!("order-{i:010}")))
        .collect();
    let before = live_bytes();
    let mut q = RetryScheduler::new();
    // `drain` keeps the Vec's buffer allocated, so freeing it does not offset the count.
    for (id, &d) in ids.drain(..).zip(dues) {
        q.schedule(id, Timestamp::from_millis(BASE_MS + d));
    }
    let held = (live_bytes() - before) as f64 / N as f64;
    eprintln!(
        "{:<26} {:>9} {:>12} {:>12.1} {:>18.1}   (String ids, memory only)",
        "rebound_scheduler",
        "",
        "",
        held,
        held - 24.0
    );
    drop((q, ids));
    eprintln!();
}

fn scheduler(c: &mut Criterion) {
    let dues = workload();
    summary(&dues);
    let mut g = c.benchmark_group("scheduler_1m_insert_then_expire");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(2 * N as u64));
    bench_contender::<Rebound>(&mut g, &dues);
    bench_contender::<Heap>(&mut g, &dues);
    bench_contender::<TokioDelayQueue>(&mut g, &dues);
    bench_contender::<BTreeCandidate>(&mut g, &dues);
    bench_contender::<SlabHeapCandidate>(&mut g, &dues);
    g.finish();
}

// ---- the store -----------------------------------------------------------------------------

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn message(biz: &str) -> Message {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    Message::new(format!("order-{id:012}"), biz, vec![b'x'; 256])
        .with_header("trace", format!("t-{id}"))
}

fn version() -> Version {
    Version::from_hash(0xabc1_23ab_c123_abc1)
}

fn retry() -> WriteOp {
    let mut message = message("ORDER");
    message.retry.attempt = 2;
    message.retry.first_delivery = Some(Timestamp::from_millis(BASE_MS));
    message.retry.failures.push(FailureRecord {
        attempt: 2,
        code: "DB_LOCK_WAIT".into(),
        message: "lock wait timeout exceeded".into(),
        attrs: Default::default(),
        at: Timestamp::from_millis(BASE_MS + 28_000),
        delay: Some(Duration::from_secs(2)),
        rule: RuleRef::Rule("db-lock".into()),
        version: version(),
    });
    WriteOp::Schedule(ScheduledRetry::new(
        message,
        Timestamp::from_millis(BASE_MS + 30_000),
    ))
}

fn dead_letter() -> WriteOp {
    let mut message = message("PAYMENT");
    message.retry.attempt = 6;
    message.retry.first_delivery = Some(Timestamp::from_millis(BASE_MS));
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new("NET_TIMEOUT", "upstream timed out"),
        label: Label::from("L2"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("net-timeout".into()),
        version: version(),
        at: Timestamp::from_millis(BASE_MS + 90_000),
    }))
}

fn store(c: &mut Criterion) {
    let mut g = c.benchmark_group("store_wal");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for (sync_name, sync) in [("full", Synchronous::Full), ("normal", Synchronous::Normal)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = SqliteOptions {
            synchronous: sync,
            ..SqliteOptions::default()
        };
        let db = SqliteStore::open_with(dir.path(), options).expect("open store");
        for batch in [1usize, 1000] {
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("retries_sync_{sync_name}"), batch),
                &batch,
                |b, &batch| {
                    b.iter_batched(
                        || (0..batch).map(|_| retry()).collect::<Vec<_>>(),
                        |ops| db.apply(&ops).expect("write retries"),
                        criterion::BatchSize::PerIteration,
                    )
                },
            );
            g.bench_with_input(
                BenchmarkId::new(format!("dead_letters_sync_{sync_name}"), batch),
                &batch,
                |b, &batch| {
                    b.iter_batched(
                        || (0..batch).map(|_| dead_letter()).collect::<Vec<_>>(),
                        |ops| db.apply(&ops).expect("write dead letters"),
                        criterion::BatchSize::PerIteration,
                    )
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, scheduler, store);
criterion_main!(benches);
