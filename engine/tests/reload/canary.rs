//! How a canary ends in the reload pipeline: promoted, it becomes the current set (source
//! `canary`) only over the set it ran against; rolled back, it is recorded and nothing changes.

use crate::support::*;
use rebound_engine::release::{ArmFigures, Arms};
use rebound_engine::reload::{Actor, Outcome, PushError, ReloadOptions, Reloader, Source};

fn arms(canary_dead: u64) -> Arms {
    let arm = |dead| ArmFigures {
        first_deliveries: 100,
        retries: 10,
        dead_letters: dead,
        acked_by_attempt: vec![90, 10],
    };
    Arms {
        stable: arm(1),
        canary: arm(canary_dead),
    }
}

fn by(reason: &str) -> Actor {
    Actor {
        operator: "canary".into(),
        reason: reason.into(),
    }
}

#[test]
fn a_promoted_canary_is_the_current_set_with_its_figures_in_history() {
    let dir = rules_dir_with("fast");
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    let stable = *reloader.handle().current().version();
    let pushed = reloader
        .promote_canary(files_of("slow"), &stable, by("promoted after 3s"), arms(1))
        .unwrap();
    assert_eq!(pushed.version, version_of_fixture("slow"));
    let status = reloader.status();
    assert_eq!(
        (status.set.version(), status.source),
        (&pushed.version, Source::Canary)
    );
    let newest = &reloader.history()[0];
    assert_eq!(
        (newest.source, newest.outcome),
        (Source::Canary, Outcome::Accepted)
    );
    assert_eq!(newest.arms, Some(arms(1)));
    assert_eq!(newest.by.as_ref().unwrap().reason, "promoted after 3s");
}

#[test]
fn a_canary_is_not_promoted_over_a_set_swapped_in_meanwhile() {
    let dir = rules_dir_with("fast");
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    let stable = *reloader.handle().current().version();
    reloader.push(files_of("slow"), None, Source::Push).unwrap();
    let e = reloader
        .promote_canary(files_of("fast"), &stable, by("promoted"), arms(1))
        .unwrap_err();
    assert!(matches!(e, PushError::Conflict { .. }), "{e:?}");
    assert_eq!(
        reloader.handle().current().version(),
        &version_of_fixture("slow")
    );
}

#[test]
fn a_rolled_back_canary_is_recorded_and_changes_nothing() {
    let dir = rules_dir_with("fast");
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    let before = reloader.status();
    let candidate = version_of_fixture("slow");
    let why = "dead-letter ratio 0.500 > 1.1 × stable 0.010 (n=100/100)";
    reloader.record_rolled_back(candidate, by(why), arms(50));
    let after = reloader.status();
    assert_eq!(after.set.version(), before.set.version());
    assert_eq!(after.source, before.source);
    let newest = &reloader.history()[0];
    assert_eq!(
        (newest.version, newest.source, newest.outcome),
        (candidate, Source::RolledBack, Outcome::Rejected)
    );
    assert_eq!(newest.by.as_ref().unwrap().reason, why);
    assert_eq!(newest.arms, Some(arms(50)));
}

#[test]
fn a_candidate_is_compiled_as_a_push_would_be_and_nothing_changes() {
    let dir = rules_dir_with("fast");
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    let entries = reloader.history().len();
    let set = reloader.compile_candidate(files_of("slow")).unwrap();
    assert_eq!(set.version(), &version_of_fixture("slow"));
    assert!(matches!(
        reloader.compile_candidate(files_of("broken")),
        Err(PushError::Rejected(_))
    ));
    assert_eq!(
        reloader.handle().current().version(),
        &version_of_fixture("fast")
    );
    assert_eq!(reloader.history().len(), entries);
}
