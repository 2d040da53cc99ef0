//! What-if over a full decision log: 100,000 logged contexts (the default `decisions.keep`),
//! decided by the shipped rules, against a candidate that changes one rule's delay.
//!
//! - `whatif/engine`: [`what_if`] alone, the log in memory;
//! - `whatif/decide_only`: the baseline in the same run, each context decided once by the
//!   candidate with nothing compared or kept (what-if's floor);
//! - `whatif/sqlite_read`: `Store::decisions` reading the whole log from `rebound.db`;
//! - `whatif/command`: `rebound whatif --json` end to end (a process: open the store, read,
//!   compile the candidate, decide, print).
//!
//! Target: `whatif/command` ≤ 2 s. Measured on 2 cores shared with other builds (medians):
//! engine 38 ms (decide_only 27 ms), sqlite_read 277 ms, command 291 ms (the binary parses
//! the log's JSON under mimalloc, the bench under the system allocator, hence a command
//! barely slower than the read alone). Reading and parsing the log is most of the command.
//!
//! Run: `cargo bench --bench whatif`

use criterion::{Criterion, criterion_group, criterion_main};
use rebound_engine::backoff::jitter_rng;
use rebound_engine::release::{LoggedContext, LoggedDecision, Outcome, jitter_seed, what_if};
use rebound_engine::{CompiledSet, OwnedFailure, PolicyHandle};
use rebound_runtime::store::{DecisionFilter, DecisionPage, SqliteStore, Store, WriteOp};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CONTEXTS: usize = 100_000;

fn root(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn load(dir: &Path) -> CompiledSet {
    rebound_engine::load_dir(dir)
        .expect("the rules read")
        .expect("the rules compile")
}

/// The shipped rules with `payment-processing` polling every 250ms.
fn candidate_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for from in ["rules", "engine/tests/fixtures/whatif/slower-processing"] {
        for entry in std::fs::read_dir(root(from)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
            }
        }
    }
    dir
}

/// `CONTEXTS` decisions of the shipped rules over their codes, attempts 1 to 6, the attrs
/// and retry-after of real failures now and then.
fn log() -> Vec<LoggedDecision> {
    let handle = PolicyHandle::new(load(&root("rules")));
    let kinds = [
        ("ORDER", "DB_LOCK_WAIT"),
        ("ORDER", "NET_TIMEOUT"),
        ("ORDER", "TIMEOUT"),
        ("PAYMENT", "PAY_PROCESSING"),
        ("PAYMENT", "RATE_LIMITED"),
        ("INVENTORY", "STOCK_INSUFFICIENT"),
        ("ORDER", "BAD_JSON"),
        ("ORDER", "PANIC"),
    ];
    (0..CONTEXTS)
        .map(|n| {
            let (biz, code) = kinds[n % kinds.len()];
            let attempt = (n / kinds.len() % 6) as u32 + 1;
            let mut failure = OwnedFailure {
                biz: biz.into(),
                code: code.into(),
                attempt,
                elapsed: Duration::from_millis(u64::from(attempt) * 1_300),
                now: 1_780_000_000_000 + n as u64,
                ..OwnedFailure::default()
            };
            if code == "RATE_LIMITED" {
                failure.retry_after = Some(Duration::from_secs(2));
            }
            if n % 3 == 0 {
                failure
                    .attrs
                    .insert("downstream".into(), "payment-gateway".into());
            }
            let id = format!("order-{n:06}");
            let seed = jitter_seed(&id, attempt, 0);
            let ctx = failure.context();
            let decided = handle.decide(&ctx, &mut jitter_rng(seed));
            LoggedDecision {
                id,
                context: LoggedContext::of(&ctx, seed),
                outcome: Outcome::of(&decided),
                arm: None,
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let logged = log();
    let candidate_rules = candidate_dir();
    let candidate = load(candidate_rules.path());
    let data = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(data.path()).unwrap();
    store
        .apply(&[WriteOp::LogDecisions {
            decisions: DecisionPage::of(&logged).expect("the log's entries"),
            keep: CONTEXTS as u64,
        }])
        .unwrap();

    let mut group = c.benchmark_group("whatif");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("engine", |b| {
        b.iter(|| black_box(what_if(&candidate, black_box(&logged))));
    });
    let handle = PolicyHandle::new(load(candidate_rules.path()));
    group.bench_function("decide_only", |b| {
        b.iter(|| {
            for entry in &logged {
                let failure = entry.context.failure();
                let mut rng = jitter_rng(entry.context.seed);
                black_box(handle.decide(&failure.context(), &mut rng));
            }
        });
    });
    let filter = DecisionFilter {
        since: None,
        limit: None,
    };
    group.bench_function("sqlite_read", |b| {
        b.iter(|| black_box(store.decisions(&filter).unwrap().len()));
    });
    group.bench_function("command", |b| {
        b.iter(|| {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_rebound"))
                .arg("whatif")
                .arg("--rules")
                .arg(candidate_rules.path())
                .arg("--data")
                .arg(data.path())
                .arg("--json")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            black_box(out.stdout.len())
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
