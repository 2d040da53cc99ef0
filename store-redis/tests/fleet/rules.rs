//! The rule set of record: compare-and-set on the version, history, what nodes run, hints.

use std::time::Duration;

use rebound_engine::Version;
use rebound_engine::reload::{HistoryEntry, Outcome, Source};
use rebound_runtime::time::Timestamp;
use rebound_store_redis::fleet::{Pushed, RuleRecord, RulesApplied, RulesHint};
use rebound_store_redis::{RedisOptions, TestServer};

use crate::{eventually, store};

/// Version `n` (the tests' own numbering; any 64 bits are a version).
fn v(n: u64) -> Version {
    Version::from_hash(n)
}

fn record(version: Version, source: Source, at: u64) -> RuleRecord {
    RuleRecord {
        version,
        files: vec![
            ("payments.yaml".into(), format!("# {version}\nrules: []\n")),
            ("orders.yaml".into(), "rules:\n  - id: \"ünïcode\"\n".into()),
        ],
        source,
        at: Timestamp::from_millis(at),
    }
}

#[test]
fn a_push_is_a_compare_and_set_on_the_version_and_history_keeps_every_set_and_the_last_files() {
    let server = TestServer::start();
    let s = store(&server, "rules-cas");
    assert_eq!(s.rules().unwrap(), None);
    assert_eq!(s.rules_version().unwrap(), None);

    let v1 = record(v(1), Source::File, 1_000);
    assert_eq!(s.seed_rules(&v1).unwrap(), Pushed::Done);
    assert_eq!(s.rules().unwrap(), Some(v1.clone()));
    // A second node seeding something else loses; the same set again is unchanged.
    assert_eq!(
        s.seed_rules(&record(v(9), Source::File, 1_001)).unwrap(),
        Pushed::Conflict {
            current: Some(v(1))
        }
    );
    assert_eq!(s.seed_rules(&v1).unwrap(), Pushed::Unchanged);

    let v2 = record(v(2), Source::Push, 2_000);
    assert_eq!(
        s.push_rules(Some(v(0)), &v2).unwrap(),
        Pushed::Conflict {
            current: Some(v(1))
        },
        "a stale If-Match"
    );
    assert_eq!(s.rules_version().unwrap(), Some(v(1)));
    assert_eq!(s.push_rules(Some(v(1)), &v2).unwrap(), Pushed::Done);
    // The same push again (its reply was lost) is not a conflict with itself.
    assert_eq!(s.push_rules(Some(v(1)), &v2).unwrap(), Pushed::Unchanged);
    assert_eq!(s.push_rules(None, &v2).unwrap(), Pushed::Unchanged);
    assert_eq!(
        s.push_rules(None, &record(v(3), Source::File, 3_000))
            .unwrap(),
        Pushed::Done
    );

    // Roll back to v1: its files come from the history.
    let mut back = s.rules_at(v(1)).unwrap().expect("v1 is in the history");
    assert_eq!(back.files, v1.files);
    back.source = Source::Rollback;
    back.at = Timestamp::from_millis(4_000);
    assert_eq!(s.push_rules(Some(v(3)), &back).unwrap(), Pushed::Done);
    assert_eq!(s.rules().unwrap(), Some(back.clone()));
    assert_eq!(s.rules_version().unwrap(), Some(v(1)));

    let entry = |version: Version, source: Source, at: u64| HistoryEntry {
        version,
        outcome: Outcome::Accepted,
        source,
        at: std::time::UNIX_EPOCH + Duration::from_millis(at),
        errors: Vec::new(),
        by: None,
        arms: None,
    };
    assert_eq!(
        s.rules_history(10).unwrap(),
        [
            entry(v(1), Source::Rollback, 4_000),
            entry(v(3), Source::File, 3_000),
            entry(v(2), Source::Push, 2_000),
            entry(v(1), Source::File, 1_000),
        ]
    );
    assert_eq!(s.rules_history(2).unwrap().len(), 2);
    assert!(s.rules_history(0).unwrap().is_empty());
    assert_eq!(s.rules_at(v(2)).unwrap(), Some(v2));
    assert_eq!(s.rules_at(v(7)).unwrap(), None);

    // The history is never trimmed; the files are kept for the last 50 accepted versions.
    for n in 0..300 {
        let r = record(v(0x1000 + n), Source::Push, 10_000 + n);
        assert_eq!(s.push_rules(None, &r).unwrap(), Pushed::Done);
    }
    assert_eq!(s.rules_history(1_000).unwrap().len(), 304);
    assert_eq!(s.rules_at(v(3)).unwrap(), None);
    assert_eq!(s.rules_at(v(0x1000 + 249)).unwrap(), None);
    assert_eq!(
        s.rules_at(v(0x1000 + 250)).unwrap().map(|r| r.source),
        Some(Source::Push),
        "the 50th latest"
    );
    assert!(s.rules_at(v(0x1000 + 299)).unwrap().is_some());
    // Accepted again, an old version counts as the latest: w250's files outlive w251's when
    // the next version comes.
    let again = RuleRecord {
        source: Source::Rollback,
        ..s.rules_at(v(0x1000 + 250)).unwrap().unwrap()
    };
    assert_eq!(s.push_rules(None, &again).unwrap(), Pushed::Done);
    assert_eq!(
        s.push_rules(None, &record(v(0x2001), Source::Push, 20_000))
            .unwrap(),
        Pushed::Done
    );
    assert!(s.rules_at(v(0x1000 + 250)).unwrap().is_some());
    assert_eq!(s.rules_at(v(0x1000 + 251)).unwrap(), None);
    assert!(s.rules_at(v(0x1000 + 252)).unwrap().is_some());
}

#[test]
fn a_store_from_before_the_kept_versions_loses_its_old_files_at_the_next_push() {
    use redis::Commands;
    let server = TestServer::start();
    let s = store(&server, "rules-old");
    // What an older node wrote: 60 versions, each with its files, and no ranking.
    let mut c = server.client();
    for n in 0..60u64 {
        let version = v(0x3000 + n).to_string();
        let entry = serde_json::json!([version, "api", n]).to_string();
        let _: () = c.lpush("{rules-old}:rules:history", entry).unwrap();
        let files = serde_json::json!([["a.yaml", format!("# {version}\n")]]).to_string();
        let at = n.to_string();
        let _: () = c
            .hset_multiple(
                format!("{{rules-old}}:rules:set:{version}"),
                &[
                    ("version", version.as_str()),
                    ("files", files.as_str()),
                    ("source", "api"),
                    ("at", at.as_str()),
                ],
            )
            .unwrap();
    }
    assert!(s.rules_at(v(0x3000)).unwrap().is_some());
    assert_eq!(
        s.push_rules(None, &record(v(0x4000), Source::Push, 100))
            .unwrap(),
        Pushed::Done
    );
    assert_eq!(s.rules_history(1_000).unwrap().len(), 61);
    // The new one and the 49 latest of before keep their files.
    assert!(s.rules_at(v(0x4000)).unwrap().is_some());
    assert!(s.rules_at(v(0x3000 + 11)).unwrap().is_some());
    assert_eq!(s.rules_at(v(0x3000 + 10)).unwrap(), None);
    assert_eq!(s.rules_at(v(0x3000)).unwrap(), None);
}

#[test]
fn a_version_or_a_source_the_store_holds_that_does_not_read_is_corrupt() {
    use rebound_runtime::store::StoreError;
    use redis::Commands;
    let server = TestServer::start();
    let s = store(&server, "rules-bad");
    let mut c = server.client();
    let _: () = c.hset("{rules-bad}:rules", "version", "v1").unwrap();
    let err = s.rules_version().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    let entry = serde_json::json!([v(1).to_string(), "someone", 1]).to_string();
    let _: () = c.lpush("{rules-bad}:rules:history", entry).unwrap();
    let err = s.rules_history(1).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

#[test]
fn each_node_reports_the_version_it_runs_and_its_errors() {
    let server = TestServer::start();
    let s = store(&server, "rules-applied");
    assert!(s.applied().unwrap().is_empty());
    let errors = vec!["payments.yaml:3: unknown field `wen`".to_owned()];
    s.set_applied("n2", v(1), Some(&errors)).unwrap();
    s.set_applied("n1", v(2), None).unwrap();
    assert_eq!(
        s.applied().unwrap(),
        [
            RulesApplied {
                node: "n1".into(),
                version: v(2),
                errors: None
            },
            RulesApplied {
                node: "n2".into(),
                version: v(1),
                errors: Some(errors)
            },
        ]
    );
    s.set_applied("n2", v(2), None).unwrap();
    assert!(
        s.applied()
            .unwrap()
            .iter()
            .all(|a| a.version == v(2) && a.errors.is_none())
    );
}

#[test]
fn hints_of_pushes_arrive_and_resume_after_the_subscriber_is_killed() {
    let server = TestServer::start();
    let options = RedisOptions::new(server.url(), "rules-hints");
    let s = store(&server, "rules-hints");
    let mut hints = s.rules_notifications(&options).unwrap();
    let mut next = |want: &dyn Fn(&RulesHint) -> bool| {
        eventually(Duration::from_secs(5), || {
            hints.try_recv().is_some_and(|h| want(&h))
        })
    };
    assert!(
        next(&|h| *h == RulesHint::Subscribed),
        "the subscription is confirmed"
    );

    assert_eq!(
        s.push_rules(None, &record(v(1), Source::Push, 1)).unwrap(),
        Pushed::Done
    );
    assert!(next(&|h| *h == RulesHint::Pushed(v(1))));
    // Another namespace's pushes are not ours.
    store(&server, "rules-other")
        .push_rules(None, &record(v(0x2001), Source::Push, 1))
        .unwrap();

    // The server drops every subscriber: ours reconnects and subscribes again by itself.
    let mut c = server.client();
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut c)
        .unwrap();
    assert_eq!(killed, 1, "our subscriber was the one pub/sub client");
    assert!(
        next(&|h| *h == RulesHint::Subscribed),
        "subscribed again after the kill"
    );
    assert_eq!(
        s.push_rules(None, &record(v(2), Source::Push, 2)).unwrap(),
        Pushed::Done
    );
    assert!(next(&|h| *h == RulesHint::Pushed(v(2))));
    assert_eq!(s.rules_version().unwrap(), Some(v(2)));
    assert!(
        hints.try_recv().is_none(),
        "nothing else: {:?}",
        hints.try_recv()
    );
}

#[test]
fn subscribing_while_the_server_is_down_fails_within_its_timeouts() {
    let mut server = TestServer::start();
    let mut options = RedisOptions::new(server.url(), "rules-down");
    options.connect_timeout = Duration::from_millis(200);
    options.response_timeout = Duration::from_millis(200);
    let s = rebound_store_redis::RedisStore::connect(&options).unwrap();
    server.kill();
    let start = std::time::Instant::now();
    let err = s.rules_notifications(&options).unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}
