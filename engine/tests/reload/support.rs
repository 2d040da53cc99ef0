//! Helpers shared by the reload tests: fixture sets, and waiting without fixed sleeps.
#![allow(dead_code)]

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::load::{read_dir, version_of};
use rebound_engine::reload::{Reloader, Source};
use rebound_engine::{CompiledSet, FailureContext, Version, compile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long any test waits for something that should happen soon. Generous: the machine
/// may be busy building.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A fixture set's directory.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reload")
        .join(name)
}

/// A fixture set as a push body: name → content.
pub fn files_of(name: &str) -> BTreeMap<String, String> {
    read_dir(&fixture(name))
        .unwrap()
        .into_iter()
        .map(|f| (f.name.clone(), f.text().unwrap().to_string()))
        .collect()
}

/// A fixture set's version.
pub fn version_of_fixture(name: &str) -> Version {
    version_of(&read_dir(&fixture(name)).unwrap())
}

/// A fixture set, compiled.
pub fn compiled(name: &str) -> CompiledSet {
    compile(read_dir(&fixture(name)).unwrap()).unwrap()
}

/// A temporary rules directory holding a copy of fixture `name`.
pub fn rules_dir_with(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in files_of(name) {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    dir
}

/// Polls `check` until it holds or [`DEADLINE`] passes; true when it held.
pub fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + DEADLINE;
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// The delay, in ms, that the current set gives a payment still processing (attempt 1).
pub fn payment_delay_ms(reloader: &Reloader) -> Option<u64> {
    let mut rng = SmallRng::seed_from_u64(1);
    let decided = reloader.handle().decide(
        &FailureContext::new("PAYMENT", "PAY_PROCESSING", 1),
        &mut rng,
    );
    decided.report(1).delay_ms
}

/// The history entries from `source`, oldest first.
pub fn entries_from(
    reloader: &Reloader,
    source: Source,
) -> Vec<rebound_engine::reload::HistoryEntry> {
    let mut v: Vec<_> = reloader
        .history()
        .into_iter()
        .filter(|e| e.source == source)
        .collect();
    v.reverse();
    v
}
