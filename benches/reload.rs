//! Reload benchmarks.
//!
//! 1. Decision latency (p50, p99) with no reloads and during a reload storm — a swap every
//!    millisecond — measured in the same run, quiet and storm phases interleaved so that the
//!    machine's background noise falls on both alike. Target: storm p99 within 1.5× of
//!    quiet p99.
//! 2. A full reload of a generated 10,000-rule set, from files to swapped
//!    (`Reloader::reload_dir`: read, validate, compile, swap, record), and the same set
//!    pushed through the pipeline (`Reloader::push`: validate, write, swap). Target: well
//!    under a second.
//!
//! `cargo bench --bench reload`. Criterion measures part 2; part 1 prints its own table,
//! since criterion reports means rather than tail percentiles.

use criterion::Criterion;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::reload::{ReloadOptions, Reloaded, Reloader, Source};
use rebound_engine::{FailureContext, PolicyHandle, SignalView, compile, read_dir};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ROUNDS: usize = 8;
const DECISIONS_PER_PHASE: usize = 100_000;
const RULES: usize = 10_000;
const FILES: usize = 10;

fn main() {
    decision_latency_quiet_vs_storm();
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    full_reload_of_ten_thousand_rules(&mut c);
    c.final_summary();
}

/// The failures the latency phases decide, cycled: the shipped rules' main paths.
fn contexts() -> Vec<(&'static str, &'static str, u32)> {
    vec![
        ("PAYMENT", "PAY_PROCESSING", 1),
        ("ORDER", "RATE_LIMITED", 2),
        ("ORDER", "DB_LOCK_WAIT", 3),
        ("INVENTORY", "NET_TIMEOUT", 5),
        ("ORDER", "BAD_JSON", 1),
        ("ORDER", "SOMETHING_ELSE", 2),
    ]
}

fn shipped_rules() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rules")
}

/// Decides `n` times, returning each decision's latency in nanoseconds.
fn measure(handle: &PolicyHandle, n: usize, rng: &mut SmallRng, out: &mut Vec<u64>) {
    let contexts = contexts();
    let signals = [("fail_rate", 0.2)];
    let attrs = rebound_engine::Attrs::new();
    for i in 0..n {
        let (biz, code, attempt) = contexts[i % contexts.len()];
        let ctx = FailureContext {
            signals: SignalView::Pairs(&signals),
            attrs: &attrs,
            ..FailureContext::new(biz, code, attempt)
        };
        let started = Instant::now();
        let decided = handle.decide(&ctx, rng);
        let took = started.elapsed();
        std::hint::black_box(decided);
        out.push(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn decision_latency_quiet_vs_storm() {
    let dir = shipped_rules();
    let a = Arc::new(compile(read_dir(&dir).unwrap()).unwrap());
    // The same rules under another version (one more comment), so every swap is a change.
    let mut files = read_dir(&dir).unwrap();
    files[0].bytes.extend_from_slice(b"\n# another version\n");
    let b = Arc::new(compile(files).unwrap());
    assert_ne!(a.version(), b.version());
    let handle = Arc::new(PolicyHandle::new(compile(read_dir(&dir).unwrap()).unwrap()));
    handle.swap(Arc::clone(&a));

    let mut rng = SmallRng::seed_from_u64(1);
    let mut warm = Vec::with_capacity(DECISIONS_PER_PHASE);
    measure(&handle, DECISIONS_PER_PHASE, &mut rng, &mut warm);

    let mut quiet = Vec::with_capacity(ROUNDS * DECISIONS_PER_PHASE);
    let mut storm = Vec::with_capacity(ROUNDS * DECISIONS_PER_PHASE);
    let mut swaps = 0u64;
    let mut storm_time = Duration::ZERO;
    for _ in 0..ROUNDS {
        measure(&handle, DECISIONS_PER_PHASE, &mut rng, &mut quiet);

        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (handle, stop, a, b) = (
                Arc::clone(&handle),
                Arc::clone(&stop),
                Arc::clone(&a),
                Arc::clone(&b),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let next = if n.is_multiple_of(2) { &b } else { &a };
                    handle.swap(Arc::clone(next));
                    n += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                n
            })
        };
        let started = Instant::now();
        measure(&handle, DECISIONS_PER_PHASE, &mut rng, &mut storm);
        storm_time += started.elapsed();
        stop.store(true, Ordering::Relaxed);
        swaps += swapper.join().unwrap();
    }
    quiet.sort_unstable();
    storm.sort_unstable();
    let (q50, q99) = (percentile(&quiet, 0.50), percentile(&quiet, 0.99));
    let (s50, s99) = (percentile(&storm, 0.50), percentile(&storm, 0.99));
    let mut report = String::new();
    let _ = writeln!(
        report,
        "decision latency, shipped rules, {ROUNDS} rounds x {DECISIONS_PER_PHASE} decisions per phase"
    );
    let _ = writeln!(
        report,
        "  quiet           p50 {q50:>6} ns   p99 {q99:>6} ns"
    );
    let _ = writeln!(
        report,
        "  reload storm    p50 {s50:>6} ns   p99 {s99:>6} ns   ({swaps} swaps, one every {:.2} ms)",
        storm_time.as_secs_f64() * 1000.0 / swaps.max(1) as f64
    );
    let ratio = s99 as f64 / q99.max(1) as f64;
    let _ = writeln!(
        report,
        "  storm p99 / quiet p99 = {ratio:.2}x (target <= 1.5x): {}",
        if ratio <= 1.5 { "met" } else { "NOT met" }
    );
    println!("{report}");
}

/// A 10,000-rule set spread over ten files: names, globs, attempt comparisons, every
/// backoff kind but scripts, and a guard on every 50th rule.
fn write_big_set(dir: &Path) {
    let per_file = RULES / FILES;
    for f in 0..FILES {
        let mut text = String::from("version: 1\n");
        if f == 0 {
            text.push_str(
                "defaults:\n  retry:\n    max_retries: 3\n    backoff: { exponential: { base: 1s, factor: 2, max: 1m }, jitter: full }\n  dead_letter: L2\n",
            );
        }
        text.push_str("rules:\n");
        for r in 0..per_file {
            let i = f * per_file + r;
            let code = if i.is_multiple_of(7) {
                format!("\"C{}*\"", i % 101)
            } else {
                format!("C{}", i % 101)
            };
            let _ = writeln!(text, "  - id: r{i:05}");
            let _ = writeln!(
                text,
                "    match: {{ biz: B{}, code: {code}, attempt: \">= {}\" }}",
                i % 37,
                1 + i % 3
            );
            if i.is_multiple_of(50) {
                let _ = writeln!(text, "    if: 'signals.fail_rate > 0.{}'", i % 9);
            }
            let backoff = match i % 4 {
                0 => format!("{{ fixed: {}ms }}", 10 + i % 90),
                1 => format!("{{ linear: {{ base: {}ms, max: 10s }} }}", 10 + i % 90),
                2 => format!(
                    "{{ exponential: {{ base: {}ms, factor: 2, max: 30s }}, jitter: full }}",
                    10 + i % 90
                ),
                _ => "{ schedule: [100ms, 1s, 5s] }".to_string(),
            };
            let _ = writeln!(
                text,
                "    retry: {{ max_retries: {}, backoff: {backoff} }}",
                1 + i % 5
            );
            let _ = writeln!(text, "    dead_letter: L{}", 1 + i % 3);
        }
        std::fs::write(dir.join(format!("{:02}-generated.yaml", f)), text).unwrap();
    }
}

fn toggle(dir: &Path, n: u64) {
    std::fs::write(
        dir.join("99-toggle.yaml"),
        format!("version: 1\n# reload {n}\n"),
    )
    .unwrap();
}

/// The median of five runs of `f`, in ms.
fn median_ms(mut f: impl FnMut() -> Duration) -> f64 {
    let mut runs: Vec<Duration> = (0..5).map(|_| f()).collect();
    runs.sort();
    runs[2].as_secs_f64() * 1000.0
}

/// Where a reload's time goes: reading the files, compiling them (the engine), and the rest
/// of the pipeline (hashing, swap, history, dropping the oldest kept set).
fn breakdown(dir: &Path, reloader: &Reloader) {
    let read = median_ms(|| {
        let started = Instant::now();
        std::hint::black_box(read_dir(dir).unwrap());
        started.elapsed()
    });
    let files = read_dir(dir).unwrap();
    let compiling = median_ms(|| {
        let files = files.clone();
        let started = Instant::now();
        let set = compile(files).unwrap();
        let took = started.elapsed();
        drop(set);
        took
    });
    let mut n = 1_000_000;
    let reload = median_ms(|| {
        n += 1;
        toggle(dir, n);
        let started = Instant::now();
        reloader.reload_dir().unwrap();
        started.elapsed()
    });
    println!(
        "reload breakdown (median of 5): read {read:.1} ms + compile {compiling:.1} ms + \
         pipeline {:.1} ms = reload_dir {reload:.1} ms",
        (reload - read - compiling).max(0.0)
    );
}

fn full_reload_of_ten_thousand_rules(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    write_big_set(dir.path());
    toggle(dir.path(), 0);
    let started = Instant::now();
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    let set = reloader.handle().current();
    println!(
        "10,000-rule set: {} files, {} rules, {} warnings; first load {:.0} ms",
        set.files().len(),
        set.rules().len(),
        set.warnings().len(),
        started.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(set.rules().len(), RULES);
    drop(set);
    breakdown(dir.path(), &reloader);

    let mut group = c.benchmark_group("reload_10k_rules");
    let mut n = 0u64;
    group.bench_function("files_to_swapped", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                toggle(dir.path(), n);
                let started = Instant::now();
                let reloaded = reloader.reload_dir().unwrap();
                total += started.elapsed();
                assert!(matches!(reloaded, Reloaded::Accepted(_)));
            }
            total
        });
    });

    let mut files: BTreeMap<String, String> = read_dir(dir.path())
        .unwrap()
        .into_iter()
        .map(|f| (f.name.clone(), f.text().unwrap().to_string()))
        .collect();
    group.bench_function("push_validate_write_swap", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                files.insert("99-toggle.yaml".into(), format!("version: 1\n# push {n}\n"));
                let body = files.clone();
                let started = Instant::now();
                let pushed = reloader.push(body, None, Source::Push).unwrap();
                total += started.elapsed();
                assert!(pushed.changed);
            }
            total
        });
    });
    group.finish();
}
