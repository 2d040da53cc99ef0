//! A known decision log for the what-if tests (`tests/cli/whatif.rs`, and through `#[path]`
//! `tests/serve` and `tests/run`): the shipped rules' decisions of every code they know,
//! written into a store as the runtime writes them (`WriteOp::LogDecisions`), and candidate
//! rule sets made of the shipped rules with a fixture's files in place of theirs.
#![allow(dead_code)]

use rebound_engine::release::{LoggedContext, LoggedDecision, Outcome, jitter_seed};
use rebound_engine::{OwnedFailure, PolicyHandle};
use rebound_runtime::store::{SqliteStore, Store, WriteOp};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SHIPPED: &str = "rules";
/// `payment-processing` polls every 250ms instead of 100ms.
pub const SLOWER_PROCESSING: &str = "engine/tests/fixtures/whatif/slower-processing";
/// `panic` gives up at once instead of retrying once.
pub const PANIC_GIVES_UP: &str = "engine/tests/fixtures/whatif/panic-gives-up";

pub fn root(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A copy of the shipped rules with the files of fixture `over` (if any) in place of theirs.
pub fn candidate(over: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut from = vec![root(SHIPPED)];
    from.extend(over.map(root));
    for source in from {
        for entry in std::fs::read_dir(source).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
            }
        }
    }
    dir
}

pub fn failure(biz: &str, code: &str, attempt: u32, now: u64) -> OwnedFailure {
    OwnedFailure {
        biz: biz.into(),
        code: code.into(),
        attempt,
        elapsed: Duration::from_millis(u64::from(attempt) * 900),
        now,
        ..OwnedFailure::default()
    }
}

/// What the shipped rules decide for every code they know, attempts 1 to 6, at `now`.
pub fn failures_at(now: u64) -> Vec<OwnedFailure> {
    let kinds = [
        ("ORDER", "BAD_JSON"),
        ("ORDER", "PANIC"),
        ("PAYMENT", "PAY_PROCESSING"),
        ("PAYMENT", "RATE_LIMITED"),
        ("INVENTORY", "STOCK_INSUFFICIENT"),
        ("ORDER", "DB_LOCK_WAIT"),
        ("ORDER", "NET_TIMEOUT"),
        ("ORDER", "SOMETHING_ELSE"),
    ];
    let mut out = Vec::new();
    for (biz, code) in kinds {
        for attempt in 1..=6 {
            out.push(failure(biz, code, attempt, now));
        }
    }
    out
}

/// The log the shipped rules write deciding `failures`, as the runtime logs them.
pub fn log_of(failures: &[OwnedFailure], first_id: usize) -> Vec<LoggedDecision> {
    let set = rebound_engine::load_dir(&root(SHIPPED)).unwrap().unwrap();
    let handle = PolicyHandle::new(set);
    failures
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let id = format!("order-{:06}", first_id + n);
            let seed = jitter_seed(&id, f.attempt, f.redrives);
            let ctx = f.context();
            let decided = handle.decide(&ctx, &mut rebound_engine::backoff::jitter_rng(seed));
            LoggedDecision {
                id,
                context: LoggedContext::of(&ctx, seed),
                outcome: Outcome::of(&decided),
                arm: None,
            }
        })
        .collect()
}

pub fn now_ms() -> u64 {
    rebound_engine::wall_time::system_now()
}

/// A data directory whose store holds `log`.
pub fn data_with(log: &[LoggedDecision]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    store
        .apply(&[WriteOp::LogDecisions {
            decisions: rebound_runtime::store::DecisionPage::of(log).unwrap(),
            keep: 100_000,
        }])
        .unwrap();
    dir
}

/// The rule files of `dir` as a map name → content (the `files` of a push).
pub fn files_in(dir: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect()
}
