//! The history keeps the files of the last accepted versions (for a console's diff), and a
//! rollback can go back to any of them.

use crate::support::*;
use rebound_engine::reload::{ReloadOptions, Reloader, RollbackError, Source};
use std::collections::BTreeMap;

fn open_keeping(fixture_name: &str, files_kept: usize) -> (tempfile::TempDir, Reloader) {
    let dir = rules_dir_with(fixture_name);
    let options = ReloadOptions {
        files_kept,
        ..ReloadOptions::default()
    };
    let reloader = Reloader::open(dir.path(), options).unwrap();
    (dir, reloader)
}

/// The files the history keeps for a fixture's version, as name → text.
fn kept(reloader: &Reloader, name: &str) -> Option<BTreeMap<String, String>> {
    let files = reloader.history_files(&version_of_fixture(name))?;
    Some(
        files
            .iter()
            .map(|f| (f.name.clone(), f.text().unwrap().to_string()))
            .collect(),
    )
}

fn dir_files(dir: &tempfile::TempDir) -> BTreeMap<String, String> {
    std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let text = std::fs::read_to_string(e.path()).unwrap();
            (e.file_name().into_string().unwrap(), text)
        })
        .collect()
}

#[test]
fn the_last_accepted_versions_keep_their_files_and_older_ones_only_their_entries() {
    let (_dir, reloader) = open_keeping("fast", 3);
    assert_eq!(
        kept(&reloader, "fast"),
        Some(files_of("fast")),
        "the start-up set"
    );
    for name in ["slow", "pair-a"] {
        reloader.push(files_of(name), None, Source::Push).unwrap();
    }
    // A rejected push takes no place among the kept versions.
    reloader
        .push(files_of("broken"), None, Source::Push)
        .unwrap_err();
    assert_eq!(kept(&reloader, "broken"), None);
    assert_eq!(kept(&reloader, "fast"), Some(files_of("fast")));
    reloader
        .push(files_of("pair-b"), None, Source::Push)
        .unwrap();
    for name in ["slow", "pair-a", "pair-b"] {
        assert_eq!(kept(&reloader, name), Some(files_of(name)), "{name}");
    }
    assert_eq!(kept(&reloader, "fast"), None, "accepted longest ago");
    // Its entry stays in the history all the same.
    let history = reloader.history();
    assert_eq!(history.len(), 5);
    assert_eq!(history[4].version, version_of_fixture("fast"));
    assert_eq!(
        reloader
            .rollback_to(&version_of_fixture("fast"))
            .unwrap_err()
            .to_string(),
        format!(
            "version {} is not one of the accepted versions kept for rollback",
            version_of_fixture("fast")
        )
    );
}

#[test]
fn a_rollback_to_a_chosen_version_is_written_recorded_and_undone_by_a_plain_rollback() {
    let (dir, reloader) = open_keeping("fast", 50);
    for name in ["slow", "pair-a", "pair-b"] {
        reloader.push(files_of(name), None, Source::Push).unwrap();
    }
    let slow = version_of_fixture("slow");
    assert_eq!(reloader.rollback_to(&slow).unwrap(), slow);
    assert_eq!(reloader.handle().current().version(), &slow);
    assert_eq!(dir_files(&dir), files_of("slow"));
    assert_eq!(payment_delay_ms(&reloader), Some(200));
    let latest = &reloader.history()[0];
    assert_eq!((latest.version, latest.source), (slow, Source::Rollback));

    // The set it replaced is the previous one now: a plain rollback returns to it.
    assert_eq!(reloader.rollback().unwrap(), version_of_fixture("pair-b"));
    assert_eq!(dir_files(&dir), files_of("pair-b"));

    // To the version in force: nothing happens, nothing is recorded.
    let before = reloader.history().len();
    let current = *reloader.handle().current().version();
    assert_eq!(reloader.rollback_to(&current).unwrap(), current);
    assert_eq!(reloader.history().len(), before);

    let unknown = "00000000000000ff".parse().unwrap();
    assert!(matches!(
        reloader.rollback_to(&unknown),
        Err(RollbackError::NotKept(v)) if v == unknown
    ));
    assert_eq!(reloader.history().len(), before);
}

#[test]
fn a_rollback_to_the_previous_version_is_a_plain_rollback() {
    let (_dir, reloader) = open_keeping("fast", 50);
    reloader.push(files_of("slow"), None, Source::Push).unwrap();
    let fast = version_of_fixture("fast");
    assert_eq!(reloader.rollback_to(&fast).unwrap(), fast);
    // As after a plain rollback, the set replaced is dropped: there is nothing further back.
    assert!(matches!(
        reloader.rollback(),
        Err(RollbackError::NoPrevious)
    ));
    assert_eq!(reloader.previous_versions(), []);
}
