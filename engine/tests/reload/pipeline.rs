//! The reload pipeline: push, dry run, rollback, directory reloads and the history.

use crate::support::*;
use rebound_engine::reload::{
    IfMatch, Outcome, PushError, ReloadError, ReloadOptions, Reloaded, Reloader, RollbackError,
    Source,
};
use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn open(fixture_name: &str) -> (tempfile::TempDir, Reloader) {
    let dir = rules_dir_with(fixture_name);
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    (dir, reloader)
}

fn dir_files(dir: &tempfile::TempDir) -> BTreeMap<String, String> {
    fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, fs::read_to_string(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn the_start_up_load_is_the_first_history_entry() {
    let (_dir, reloader) = open("fast");
    let history = reloader.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].version, version_of_fixture("fast"));
    assert_eq!(history[0].outcome, Outcome::Accepted);
    assert_eq!(history[0].source, Source::File);
    assert_eq!(reloader.status().source, Source::File);
}

#[test]
fn an_accepted_push_is_swapped_in_and_written_into_the_directory() {
    let (dir, reloader) = open("fast");
    let pushed = reloader.push(files_of("slow"), None, Source::Push).unwrap();
    assert_eq!(pushed.version, version_of_fixture("slow"));
    assert!(pushed.changed);
    assert_eq!(payment_delay_ms(&reloader), Some(200));
    assert_eq!(dir_files(&dir), files_of("slow"));
    let status = reloader.status();
    assert_eq!(status.set.version(), &pushed.version);
    assert_eq!(status.source, Source::Push);
    let newest = &reloader.history()[0];
    assert_eq!(
        (newest.outcome, newest.source, &newest.version),
        (Outcome::Accepted, Source::Push, &pushed.version)
    );
}

#[test]
fn the_status_is_the_set_that_decides() {
    let (_dir, reloader) = open("fast");
    let same = |r: &Reloader| Arc::ptr_eq(&r.status().set, &r.handle().current());
    assert!(same(&reloader));
    reloader.push(files_of("slow"), None, Source::Push).unwrap();
    assert!(same(&reloader));
    assert_eq!(reloader.history()[0].at, reloader.status().loaded_at);
    reloader.rollback().unwrap();
    assert!(same(&reloader));
    assert_eq!(reloader.history()[0].at, reloader.status().loaded_at);
    // A set swapped into the handle by hand is the one the status shows, too.
    reloader.handle().swap(Arc::new(compiled("pair-a")));
    let status = reloader.status();
    assert!(same(&reloader));
    assert_eq!(
        (status.set.version(), status.source),
        (&version_of_fixture("pair-a"), Source::Push)
    );
}

#[test]
fn files_absent_from_a_push_are_removed_and_others_are_kept() {
    let (dir, reloader) = open("pair-a");
    fs::write(dir.path().join("README.txt"), "not a rule file").unwrap();
    reloader.push(files_of("fast"), None, Source::Push).unwrap();
    let names: Vec<String> = dir_files(&dir).into_keys().collect();
    assert_eq!(names, ["10-payment.yaml", "README.txt"]);
}

#[test]
fn an_invalid_push_is_rejected_with_positions_and_the_old_set_stays() {
    let (dir, reloader) = open("fast");
    let err = reloader
        .push(files_of("broken"), None, Source::Push)
        .unwrap_err();
    let PushError::Rejected(rejected) = err else {
        panic!("expected a rejection, got {err:?}");
    };
    let first = rejected.errors().next().unwrap();
    assert_eq!(first.file, "10-payment.yaml");
    assert_eq!((first.line, first.column), (Some(7), Some(7)));
    assert_eq!(payment_delay_ms(&reloader), Some(100));
    assert_eq!(dir_files(&dir), files_of("fast"));
    let newest = &reloader.history()[0];
    assert_eq!(newest.outcome, Outcome::Rejected);
    assert_eq!(newest.version, version_of_fixture("broken"));
    assert_eq!(newest.errors[0].line, Some(7));
}

#[test]
fn if_match_is_a_compare_and_swap() {
    let (_dir, reloader) = open("fast");
    let fast = version_of_fixture("fast");
    let stale = IfMatch::parse("\"0000000000000000\"");
    let err = reloader
        .push(files_of("slow"), Some(&stale), Source::Push)
        .unwrap_err();
    assert!(matches!(err, PushError::Conflict { ref current } if *current == fast));
    assert_eq!(payment_delay_ms(&reloader), Some(100));
    let fresh = IfMatch::parse(&format!("\"{fast}\""));
    reloader
        .push(files_of("slow"), Some(&fresh), Source::Push)
        .unwrap();
    // The same precondition is stale now.
    let err = reloader
        .push(files_of("fast"), Some(&fresh), Source::Push)
        .unwrap_err();
    assert!(matches!(err, PushError::Conflict { .. }));
}

#[test]
fn pushing_the_set_in_force_changes_nothing() {
    let (_dir, reloader) = open("fast");
    let before = reloader.history().len();
    let pushed = reloader.push(files_of("fast"), None, Source::Push).unwrap();
    assert!(!pushed.changed);
    assert_eq!(reloader.history().len(), before);
    assert!(reloader.previous_versions().is_empty());
}

#[test]
fn bad_names_and_empty_pushes_are_refused_and_nothing_is_written() {
    let (dir, reloader) = open("fast");
    for name in ["../x.yaml", "a/b.yaml", "x.json", ".hidden.yaml"] {
        let files = BTreeMap::from([(name.to_string(), "version: 1\n".to_string())]);
        let err = reloader.push(files, None, Source::Push).unwrap_err();
        assert!(matches!(err, PushError::BadName(_)), "{name}: {err:?}");
    }
    let err = reloader
        .push(BTreeMap::new(), None, Source::Push)
        .unwrap_err();
    assert!(matches!(err, PushError::Empty));
    assert_eq!(dir_files(&dir), files_of("fast"));
    assert!(!dir.path().parent().unwrap().join("x.yaml").exists());
    assert_eq!(payment_delay_ms(&reloader), Some(100));
}

#[test]
fn a_dry_run_changes_nothing() {
    let (dir, reloader) = open("fast");
    let before = reloader.history().len();
    let ok = reloader.validate(files_of("slow"), None).unwrap();
    assert_eq!(ok.version, version_of_fixture("slow"));
    let err = reloader.validate(files_of("broken"), None).unwrap_err();
    assert!(matches!(err, PushError::Rejected(_)));
    assert_eq!(reloader.history().len(), before);
    assert_eq!(dir_files(&dir), files_of("fast"));
    assert_eq!(payment_delay_ms(&reloader), Some(100));
}

#[test]
fn rollback_walks_back_through_accepted_sets_to_the_start_up_set() {
    let (dir, reloader) = open("fast");
    assert!(matches!(
        reloader.rollback(),
        Err(RollbackError::NoPrevious)
    ));
    reloader.push(files_of("slow"), None, Source::Push).unwrap();
    reloader
        .push(files_of("pair-a"), None, Source::Push)
        .unwrap();
    // A rejected push is not a version to roll back to.
    reloader
        .push(files_of("broken"), None, Source::Push)
        .unwrap_err();

    assert_eq!(reloader.rollback().unwrap(), version_of_fixture("slow"));
    assert_eq!(payment_delay_ms(&reloader), Some(200));
    assert_eq!(dir_files(&dir), files_of("slow"));
    assert_eq!(reloader.status().source, Source::Rollback);

    assert_eq!(reloader.rollback().unwrap(), version_of_fixture("fast"));
    assert_eq!(dir_files(&dir), files_of("fast"));
    assert!(matches!(
        reloader.rollback(),
        Err(RollbackError::NoPrevious)
    ));
    let sources: Vec<Source> = reloader.history().iter().map(|e| e.source).collect();
    assert_eq!(
        sources,
        [
            Source::Rollback,
            Source::Rollback,
            Source::Push,
            Source::Push,
            Source::Push,
            Source::File
        ]
    );
}

#[test]
fn a_directory_reload_swaps_only_new_valid_contents_and_logs_a_broken_file_once() {
    let (dir, reloader) = open("fast");
    assert!(matches!(reloader.reload_dir(), Ok(Reloaded::Unchanged(_))));
    let target = dir.path().join("10-payment.yaml");
    fs::write(&target, &files_of("broken")["10-payment.yaml"]).unwrap();
    assert!(matches!(
        reloader.reload_dir(),
        Err(ReloadError::Rejected(_))
    ));
    // Touching the same broken contents again is not a new attempt.
    assert!(matches!(reloader.reload_dir(), Ok(Reloaded::Unchanged(_))));
    assert_eq!(entries_from(&reloader, Source::File).len(), 2);
    assert_eq!(payment_delay_ms(&reloader), Some(100));

    fs::write(&target, &files_of("slow")["10-payment.yaml"]).unwrap();
    assert_eq!(
        reloader.reload_dir().unwrap(),
        Reloaded::Accepted(version_of_fixture("slow"))
    );
    assert_eq!(payment_delay_ms(&reloader), Some(200));

    // The same broken contents again, after a good set: a new attempt, logged again.
    fs::write(&target, &files_of("broken")["10-payment.yaml"]).unwrap();
    assert!(matches!(
        reloader.reload_dir(),
        Err(ReloadError::Rejected(_))
    ));
    assert_eq!(entries_from(&reloader, Source::File).len(), 4);
}

#[test]
fn a_name_the_directory_cannot_hold_is_a_bad_name_and_nothing_is_swapped_in() {
    let (dir, reloader) = open("fast");
    // A directory where a pushed file must go: the rename cannot replace it.
    fs::create_dir(dir.path().join("zz.yaml")).unwrap();
    let mut files = files_of("slow");
    files.insert("zz.yaml".into(), "version: 1\n".into());
    let err = reloader.push(files, None, Source::Push).unwrap_err();
    assert!(
        matches!(&err, PushError::BadName(m) if m.contains("'zz.yaml'") && m.contains("directory")),
        "{err:?}"
    );
    assert_eq!(payment_delay_ms(&reloader), Some(100));
    assert_eq!(dir_files(&dir), files_of("fast"));
    let last = &reloader.history()[0];
    assert_eq!(last.outcome, Outcome::Rejected);
    assert_eq!(last.errors[0].file, "zz.yaml");
}

#[test]
fn a_set_that_cannot_be_written_is_not_swapped_in() {
    let (dir, reloader) = open("fast");
    // The rules directory is gone: the server's trouble, not the pusher's.
    fs::remove_dir_all(dir.path()).unwrap();
    let err = reloader
        .push(files_of("slow"), None, Source::Push)
        .unwrap_err();
    assert!(matches!(err, PushError::Write { .. }), "{err:?}");
    assert_eq!(payment_delay_ms(&reloader), Some(100));
    assert_eq!(reloader.history()[0].outcome, Outcome::Rejected);
}

#[test]
fn a_name_too_long_is_refused_by_push_and_dry_run_alike() {
    let (dir, reloader) = open("fast");
    let name = format!("{}.yaml", "a".repeat(10_000));
    let files = BTreeMap::from([(name, files_of("slow")["10-payment.yaml"].clone())]);
    let dry = reloader.validate(files.clone(), None).unwrap_err();
    let push = reloader.push(files, None, Source::Push).unwrap_err();
    for err in [dry, push] {
        assert!(
            matches!(&err, PushError::BadName(m) if m.contains("at most 242 bytes")),
            "{err:?}"
        );
    }
    assert_eq!(dir_files(&dir), files_of("fast"));
    assert_eq!(payment_delay_ms(&reloader), Some(100));
}

#[test]
fn the_listener_hears_every_recorded_attempt() {
    let dir = rules_dir_with("fast");
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&heard);
    let options = ReloadOptions::default().on_reload(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let reloader = Reloader::open(dir.path(), options).unwrap();
    reloader.push(files_of("slow"), None, Source::Push).unwrap();
    reloader
        .push(files_of("broken"), None, Source::Push)
        .unwrap_err();
    reloader.rollback().unwrap();
    assert_eq!(heard.load(Ordering::Relaxed), 4);
    assert_eq!(reloader.history().len(), 4);
}

#[test]
fn history_and_previous_sets_are_bounded() {
    let dir = rules_dir_with("fast");
    let options = ReloadOptions {
        history_limit: 3,
        keep_previous: 2,
        ..ReloadOptions::default()
    };
    let reloader = Reloader::open(dir.path(), options).unwrap();
    for name in ["slow", "pair-a", "pair-b", "fast"] {
        reloader.push(files_of(name), None, Source::Push).unwrap();
    }
    assert_eq!(reloader.history().len(), 3);
    assert_eq!(
        reloader.previous_versions(),
        [version_of_fixture("pair-b"), version_of_fixture("pair-a")]
    );
}
