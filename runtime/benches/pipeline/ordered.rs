//! The cost of ordered keys (issue 17): the same topology (5% store failures, in-memory
//! retries), every message with a key of its own, with ordering on (`ordered: all`) against
//! ordering off, in interleaved rounds (which goes first alternates); then, with 10% failures
//! and 100 keys, how long later messages of a key wait behind an earlier one (the runtime's
//! `ordered_wait` histogram, from held to let go, interpolated inside its buckets) and what
//! ordering costs there, at the default `max_held` (10,000: the spout runs ahead and a key's
//! messages queue up behind each other) and at 100 (about one held message per key).
//!
//! `BENCH_ORDERED_ONLY=1 cargo bench -p rebound-runtime --bench pipeline` runs only this part.

use super::*;
use rebound_runtime::stats::{Histogram, LATENCY_BOUNDS, StatsSnapshot};

/// One in-memory run; returns (acked, elapsed) and the runtime's counters at the end.
pub(crate) fn run_keyed(
    rt: &tokio::runtime::Runtime,
    work: Work,
    max_pending: usize,
    fail_one_in: u64,
    keys: Keys,
    ordered: Ordered,
    max_held: usize,
) -> ((u64, Duration), StatsSnapshot) {
    rt.block_on(async {
        let acked = Arc::new(AtomicU64::new(0));
        let dead = Arc::new(AtomicU64::new(0));
        let mut b = TopologyBuilder::new("bench-ordered");
        b.config(Config {
            max_spout_pending: max_pending,
            ordering: OrderingConfig {
                ordered,
                max_held,
                ..OrderingConfig::default()
            },
            ..Config::default()
        });
        let (spout_acked, spout_dead) = (acked.clone(), dead.clone());
        b.spout(SOURCE, 1, move |_| {
            OrderSpout::new(
                *MESSAGES,
                keys.clone(),
                spout_acked.clone(),
                spout_dead.clone(),
            )
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
        let seams = Seams::in_memory().with_policy(FixedPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(1),
            ..FixedPolicy::default()
        });
        let start = Instant::now();
        let running = topology.start(seams);
        running.wait_quiescent().await;
        let elapsed = start.elapsed();
        let stats = running.stats();
        running.shutdown(Duration::from_secs(5)).await;
        ((acked.load(Ordering::Relaxed), elapsed), stats)
    })
}

/// Quantile `q` of `h` in milliseconds, interpolated linearly inside its bucket.
fn quantile_ms(h: &Histogram, q: f64) -> f64 {
    let rank = (q * h.count as f64).max(f64::MIN_POSITIVE);
    let mut seen = 0.0;
    for (i, &c) in h.buckets.iter().enumerate() {
        let next = seen + c as f64;
        if c > 0 && next >= rank {
            let lo = if i == 0 {
                0.0
            } else {
                ms(LATENCY_BOUNDS[i - 1])
            };
            let Some(&hi) = LATENCY_BOUNDS.get(i) else {
                return lo;
            };
            return lo + (ms(hi) - lo) * ((rank - seen) / c as f64);
        }
        seen = next;
    }
    0.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Ordering on against off, every key distinct, in interleaved rounds; then the waits with
/// 10% failures over 100 keys.
pub(crate) fn interleaved_ordered(
    rt: &tokio::runtime::Runtime,
    work: Work,
    max_pending: usize,
    rounds: usize,
) {
    let default_held = OrderingConfig::default().max_held;
    let run = |keys: Keys, ordered: Ordered, fail_one_in, max_held| {
        let (through, stats) =
            run_keyed(rt, work, max_pending, fail_one_in, keys, ordered, max_held);
        (per_second(through), stats)
    };
    let (mut off, mut on, mut bare, mut ratio) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        let pair = |ordered| run(Keys::Distinct, ordered, 20, default_held);
        let ((o, _), (n, stats)) = if round % 2 == 0 {
            let o = pair(Ordered::None);
            (o, pair(Ordered::All))
        } else {
            let n = pair(Ordered::All);
            (pair(Ordered::None), n)
        };
        let (b, _) = run(Keys::None, Ordered::All, 20, default_held);
        assert_eq!(stats.ordered_wait.count, 0, "distinct keys never wait");
        ratio.push(n / o);
        off.push(o);
        on.push(n);
        bare.push(b);
    }
    println!(
        "\nOrdered keys, {work:?} stages, 5% failures, every key distinct, {rounds} interleaved rounds of {} messages (medians):",
        *MESSAGES
    );
    println!("  {:>10.0} acked/s   ordering off", median(off));
    println!(
        "  {:>10.0} acked/s   ordering on (ordered: all)",
        median(on)
    );
    println!(
        "  {:>10.0} acked/s   ordering on, messages without a key (reference)",
        median(bare)
    );
    println!(
        "  ratio on / off:                 {:.3}   (target >= 0.95)",
        median(ratio)
    );

    let keys: Arc<[Key]> = (0..100).map(|k| Key::from(format!("key-{k}"))).collect();
    let (free, _) = run(Keys::Few(keys.clone()), Ordered::None, 10, default_held);
    println!(
        "\nOrdered keys, {work:?} stages, 10% failures, 100 keys, {} messages, retries after 1, 2, 4… ms; ordering off: {free:.0} acked/s",
        *MESSAGES
    );
    for max_held in [default_held, 100] {
        let (held, stats) = run(Keys::Few(keys.clone()), Ordered::All, 10, max_held);
        let w = &stats.ordered_wait;
        println!(
            "  max_held {max_held:>6}: {held:>8.0} acked/s; held {:>5.1}% of messages; wait while held p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
            100.0 * w.count as f64 / *MESSAGES as f64,
            quantile_ms(w, 0.5),
            quantile_ms(w, 0.99),
            ms(w.sum.checked_div(w.count.max(1) as u32).unwrap_or_default())
        );
    }
}
