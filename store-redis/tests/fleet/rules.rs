//! The rule set of record: compare-and-set on the version, history, what nodes run, hints.

use std::time::Duration;

use rebound_runtime::time::Timestamp;
use rebound_store_redis::fleet::{Pushed, RuleEntry, RuleRecord, RulesApplied, RulesHint};
use rebound_store_redis::{RedisOptions, TestServer};

use crate::{eventually, store};

fn record(version: &str, source: &str, at: u64) -> RuleRecord {
    RuleRecord {
        version: version.into(),
        files: vec![
            ("payments.yaml".into(), format!("# {version}\nrules: []\n")),
            ("orders.yaml".into(), "rules:\n  - id: \"ünïcode\"\n".into()),
        ],
        source: source.into(),
        at: Timestamp::from_millis(at),
    }
}

#[test]
fn a_push_is_a_compare_and_set_on_the_version_and_history_keeps_every_set_and_the_last_files() {
    let server = TestServer::start();
    let s = store(&server, "rules-cas");
    assert_eq!(s.rules().unwrap(), None);
    assert_eq!(s.rules_version().unwrap(), None);

    let v1 = record("v1", "seed", 1_000);
    assert_eq!(s.seed_rules(&v1).unwrap(), Pushed::Done);
    assert_eq!(s.rules().unwrap(), Some(v1.clone()));
    // A second node seeding something else loses; the same set again is unchanged.
    assert_eq!(
        s.seed_rules(&record("v9", "seed", 1_001)).unwrap(),
        Pushed::Conflict {
            current: Some("v1".into())
        }
    );
    assert_eq!(s.seed_rules(&v1).unwrap(), Pushed::Unchanged);

    let v2 = record("v2", "api", 2_000);
    assert_eq!(
        s.push_rules(Some("v0"), &v2).unwrap(),
        Pushed::Conflict {
            current: Some("v1".into())
        },
        "a stale If-Match"
    );
    assert_eq!(s.rules_version().unwrap().as_deref(), Some("v1"));
    assert_eq!(s.push_rules(Some("v1"), &v2).unwrap(), Pushed::Done);
    // The same push again (its reply was lost) is not a conflict with itself.
    assert_eq!(s.push_rules(Some("v1"), &v2).unwrap(), Pushed::Unchanged);
    assert_eq!(s.push_rules(None, &v2).unwrap(), Pushed::Unchanged);
    assert_eq!(
        s.push_rules(None, &record("v3", "file", 3_000)).unwrap(),
        Pushed::Done
    );

    // Roll back to v1: its files come from the history.
    let mut back = s.rules_at("v1").unwrap().expect("v1 is in the history");
    assert_eq!(back.files, v1.files);
    back.source = "rollback".into();
    back.at = Timestamp::from_millis(4_000);
    assert_eq!(s.push_rules(Some("v3"), &back).unwrap(), Pushed::Done);
    assert_eq!(s.rules().unwrap(), Some(back.clone()));
    assert_eq!(s.rules_version().unwrap().as_deref(), Some("v1"));

    let entry = |v: &str, src: &str, at: u64| RuleEntry {
        version: v.into(),
        source: src.into(),
        at: Timestamp::from_millis(at),
    };
    assert_eq!(
        s.rules_history(10).unwrap(),
        [
            entry("v1", "rollback", 4_000),
            entry("v3", "file", 3_000),
            entry("v2", "api", 2_000),
            entry("v1", "seed", 1_000),
        ]
    );
    assert_eq!(s.rules_history(2).unwrap().len(), 2);
    assert!(s.rules_history(0).unwrap().is_empty());
    assert_eq!(s.rules_at("v2").unwrap(), Some(v2));
    assert_eq!(s.rules_at("v7").unwrap(), None);

    // The history is never trimmed; the files are kept for the last 50 accepted versions.
    for n in 0..300 {
        let r = record(&format!("w{n}"), "api", 10_000 + n);
        assert_eq!(s.push_rules(None, &r).unwrap(), Pushed::Done);
    }
    assert_eq!(s.rules_history(1_000).unwrap().len(), 304);
    assert_eq!(s.rules_at("v3").unwrap(), None);
    assert_eq!(s.rules_at("w249").unwrap(), None);
    assert_eq!(
        s.rules_at("w250").unwrap().map(|r| r.source).as_deref(),
        Some("api"),
        "the 50th latest"
    );
    assert!(s.rules_at("w299").unwrap().is_some());
    // Accepted again, an old version counts as the latest: w250's files outlive w251's when
    // the next version comes.
    let again = RuleRecord {
        source: "rollback".into(),
        ..s.rules_at("w250").unwrap().unwrap()
    };
    assert_eq!(s.push_rules(None, &again).unwrap(), Pushed::Done);
    assert_eq!(
        s.push_rules(None, &record("x1", "api", 20_000)).unwrap(),
        Pushed::Done
    );
    assert!(s.rules_at("w250").unwrap().is_some());
    assert_eq!(s.rules_at("w251").unwrap(), None);
    assert!(s.rules_at("w252").unwrap().is_some());
}

#[test]
fn a_store_from_before_the_kept_versions_loses_its_old_files_at_the_next_push() {
    use redis::Commands;
    let server = TestServer::start();
    let s = store(&server, "rules-old");
    // What an older node wrote: 60 versions, each with its files, and no ranking.
    let mut c = server.client();
    for n in 0..60u64 {
        let version = format!("o{n}");
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
    assert!(s.rules_at("o0").unwrap().is_some());
    assert_eq!(
        s.push_rules(None, &record("new", "api", 100)).unwrap(),
        Pushed::Done
    );
    assert_eq!(s.rules_history(1_000).unwrap().len(), 61);
    // The new one and the 49 latest of before keep their files.
    assert!(s.rules_at("new").unwrap().is_some());
    assert!(s.rules_at("o11").unwrap().is_some());
    assert_eq!(s.rules_at("o10").unwrap(), None);
    assert_eq!(s.rules_at("o0").unwrap(), None);
}

#[test]
fn each_node_reports_the_version_it_runs_and_its_errors() {
    let server = TestServer::start();
    let s = store(&server, "rules-applied");
    assert!(s.applied().unwrap().is_empty());
    let errors = vec!["payments.yaml:3: unknown field `wen`".to_owned()];
    s.set_applied("n2", "v1", Some(&errors)).unwrap();
    s.set_applied("n1", "v2", None).unwrap();
    assert_eq!(
        s.applied().unwrap(),
        [
            RulesApplied {
                node: "n1".into(),
                version: "v2".into(),
                errors: None
            },
            RulesApplied {
                node: "n2".into(),
                version: "v1".into(),
                errors: Some(errors)
            },
        ]
    );
    s.set_applied("n2", "v2", None).unwrap();
    assert!(
        s.applied()
            .unwrap()
            .iter()
            .all(|a| a.version == "v2" && a.errors.is_none())
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
        s.push_rules(None, &record("v1", "api", 1)).unwrap(),
        Pushed::Done
    );
    assert!(next(&|h| *h == RulesHint::Pushed("v1".into())));
    // Another namespace's pushes are not ours.
    store(&server, "rules-other")
        .push_rules(None, &record("x1", "api", 1))
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
        s.push_rules(None, &record("v2", "api", 2)).unwrap(),
        Pushed::Done
    );
    assert!(next(&|h| *h == RulesHint::Pushed("v2".into())));
    assert_eq!(s.rules_version().unwrap().as_deref(), Some("v2"));
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
