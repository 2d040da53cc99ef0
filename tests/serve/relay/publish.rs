//! `dead_letters.publish` end to end (`sources.md`, "Dead letters to the broker"): the real
//! `rebound relay`, a `redis-server` as the source, a second one as the publish target, and a
//! handler that declines every order (the rules dead-letter `PAY_FAILED` at once). Each
//! stored letter reaches the target with every field; one made while the target is down
//! arrives once it is back, the refusals counted; one a relay killed before it could publish
//! is published at its next start. On a JetStream subject (a `nats-server -js`), the payload
//! is the body and the fields are headers, each acked by the stream.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use rebound_store_redis::TestServer;

use super::redis_stream::rules_dir;
use super::support::{Answer, HandlerServer, Relay, within};

/// The handler: every order declined for good.
fn declining() -> HandlerServer {
    HandlerServer::start(|_| Answer::code(422, "PAY_FAILED"))
}

/// Orders `from..from + n` on the source's stream `orders`.
fn add(server: &TestServer, from: usize, n: usize) {
    let mut c = server.client();
    for i in from..from + n {
        let _: String = redis::cmd("XADD")
            .arg("orders")
            .arg("*")
            .arg("biz")
            .arg("PAYMENT")
            .arg("payload")
            .arg(format!("{{\"n\":{i}}}"))
            .query(&mut c)
            .unwrap();
    }
}

/// The entries of the target's stream `dead`, each as its fields; none while it is down.
fn published(target: &TestServer) -> Vec<BTreeMap<String, String>> {
    let Ok(mut c) = redis::Client::open(target.url()).and_then(|c| c.get_connection()) else {
        return Vec::new();
    };
    let entries: Vec<(String, BTreeMap<String, String>)> = redis::cmd("XRANGE")
        .arg("dead")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap_or_default();
    entries.into_iter().map(|(_, fields)| fields).collect()
}

/// The message ids published to the target.
fn published_ids(target: &TestServer) -> BTreeSet<String> {
    published(target)
        .into_iter()
        .filter_map(|f| f.get("rebound-id").cloned())
        .collect()
}

/// A configuration file publishing to the target's stream `dead`.
fn config(dir: &Path, target: &TestServer) -> String {
    let path = dir.join("relay.yaml");
    std::fs::write(
        &path,
        format!(
            "dead_letters:\n  publish: redis-stream://127.0.0.1:{}/dead\n",
            target.port()
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn start(
    source: &TestServer,
    handler: &HandlerServer,
    rules: &Path,
    data: &Path,
    config: &str,
) -> Relay {
    let source = format!(
        "redis-stream://127.0.0.1:{}/orders?group=rebound",
        source.port()
    );
    Relay::start(
        rules,
        data,
        &[
            "--source",
            &source,
            "--handler",
            &handler.url(),
            "--config",
            config,
        ],
    )
}

/// The ids of the relay's stored dead letters.
fn stored_ids(relay: &Relay) -> BTreeSet<String> {
    relay.get_json("/v1/dead-letters?limit=1000")["dead_letters"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|l| l["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `rebound_dead_letters_published_total{result=RESULT}`, 0 when absent.
fn counted(relay: &Relay, result: &str) -> u64 {
    let line = format!("rebound_dead_letters_published_total{{result=\"{result}\"}} ");
    relay
        .get("/metrics")
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_poison_message_ends_a_dead_letter_and_on_the_publish_stream_with_every_field() {
    let (source, target) = (TestServer::start(), TestServer::start());
    let handler = declining();
    let (data, dir, rules) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        rules_dir(),
    );
    let config = config(dir.path(), &target);
    add(&source, 0, 3);
    let relay = start(&source, &handler, rules.path(), data.path(), &config);
    assert!(
        within(Duration::from_secs(30), || stored_ids(&relay).len() == 3
            && published_ids(&target) == stored_ids(&relay)),
        "stored {:?}, published {:?}\n{}",
        stored_ids(&relay),
        published_ids(&target),
        relay.stderr()
    );
    let payloads: BTreeSet<String> = published(&target)
        .iter()
        .map(|f| f["payload"].clone())
        .collect();
    let expected: BTreeSet<String> = (0..3).map(|i| format!("{{\"n\":{i}}}")).collect();
    assert_eq!(payloads, expected, "the message's payload bytes");
    for fields in published(&target) {
        let id = &fields["rebound-id"];
        assert!(id.starts_with("orders/"), "{fields:?}");
        for (name, value) in [
            ("rebound-biz", "PAYMENT"),
            ("rebound-label", "L3"),
            ("rebound-reason", "give_up"),
            ("rebound-rule", "declined"),
            ("rebound-code", "PAY_FAILED"),
            ("rebound-first-code", "PAY_FAILED"),
            ("rebound-attempts", "1"),
        ] {
            assert_eq!(
                fields.get(name).map(String::as_str),
                Some(value),
                "{name}: {fields:?}"
            );
        }
        assert_eq!(
            fields.len(),
            9,
            "payload and the eight rebound-* fields: {fields:?}"
        );
    }
    assert_eq!(counted(&relay, "published"), 3);
    assert_eq!(counted(&relay, "failed"), 0);
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    assert!(
        data.path().join("dead-letters-published").exists(),
        "the mark is kept in the data directory"
    );
    // A start with nothing new publishes nothing again.
    let relay = start(&source, &handler, rules.path(), data.path(), &config);
    assert!(
        within(Duration::from_secs(10), || relay
            .stderr()
            .contains("publishing dead letters")),
        "{}",
        relay.stderr()
    );
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    assert_eq!(
        published(&target).len(),
        3,
        "the catch-up starts after the mark"
    );
}

#[test]
fn letters_made_while_the_publish_target_is_down_all_arrive_once_it_is_back() {
    let (source, mut target) = (TestServer::start(), TestServer::start());
    let handler = declining();
    let (data, dir, rules) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        rules_dir(),
    );
    let config = config(dir.path(), &target);
    target.kill();
    add(&source, 0, 5);
    let relay = start(&source, &handler, rules.path(), data.path(), &config);
    assert!(
        within(Duration::from_secs(30), || stored_ids(&relay).len() == 5
            && counted(&relay, "failed") >= 2),
        "stored {:?}, failed {}\n{}",
        stored_ids(&relay),
        counted(&relay, "failed"),
        relay.stderr()
    );
    assert_eq!(counted(&relay, "published"), 0);
    // More while it is still down.
    add(&source, 5, 3);
    assert!(
        within(Duration::from_secs(30), || stored_ids(&relay).len() == 8),
        "stored {:?}",
        stored_ids(&relay)
    );
    target.restart();
    assert!(
        within(Duration::from_secs(30), || published_ids(&target)
            == stored_ids(&relay)),
        "published {:?} of {:?}\n{}",
        published_ids(&target),
        stored_ids(&relay),
        relay.stderr()
    );
    assert!(counted(&relay, "published") >= 8);
    assert!(counted(&relay, "failed") >= 2, "the refusals are counted");
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}

#[test]
fn a_relay_killed_before_it_could_publish_publishes_at_its_next_start() {
    let (source, mut target) = (TestServer::start(), TestServer::start());
    let handler = declining();
    let (data, dir, rules) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        rules_dir(),
    );
    let config = config(dir.path(), &target);
    target.kill();
    add(&source, 0, 4);
    let relay = start(&source, &handler, rules.path(), data.path(), &config);
    assert!(
        within(Duration::from_secs(30), || stored_ids(&relay).len() == 4
            && counted(&relay, "failed") >= 1),
        "stored {:?}, failed {}\n{}",
        stored_ids(&relay),
        counted(&relay, "failed"),
        relay.stderr()
    );
    let stored = stored_ids(&relay);
    relay.kill9();
    target.restart();
    assert!(published_ids(&target).is_empty(), "nothing was published");
    let relay = start(&source, &handler, rules.path(), data.path(), &config);
    assert!(
        within(Duration::from_secs(30), || published_ids(&target) == stored),
        "published {:?} of {stored:?}\n{}",
        published_ids(&target),
        relay.stderr()
    );
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}

#[test]
fn a_letter_is_published_to_a_jetstream_subject_with_its_headers_and_acked() {
    use async_nats::jetstream::{self, stream};
    let source = TestServer::start();
    let nats = rebound_sources::NatsServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dead = rt.block_on(async {
        let client = async_nats::connect(nats.addr()).await.unwrap();
        jetstream::new(client)
            .create_stream(stream::Config {
                name: "DEAD".into(),
                subjects: vec!["dead.>".into()],
                ..Default::default()
            })
            .await
            .unwrap()
    });
    let handler = declining();
    let (data, dir, rules) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        rules_dir(),
    );
    let config = dir.path().join("relay.yaml");
    std::fs::write(
        &config,
        format!(
            "dead_letters:\n  publish: nats://{}/dead.orders\n",
            nats.addr()
        ),
    )
    .unwrap();
    add(&source, 0, 2);
    let relay = start(
        &source,
        &handler,
        rules.path(),
        data.path(),
        &config.display().to_string(),
    );
    let messages = || {
        rt.block_on(async {
            let mut out = Vec::new();
            for seq in 1..=10 {
                match dead.get_raw_message(seq).await {
                    Ok(m) => out.push(m),
                    Err(_) => break,
                }
            }
            out
        })
    };
    assert!(
        within(Duration::from_secs(30), || messages().len() == 2
            && counted(&relay, "published") == 2),
        "{} on the stream\n{}",
        messages().len(),
        relay.stderr()
    );
    let ids: BTreeSet<String> = messages()
        .iter()
        .map(|m| {
            let header = |name: &str| m.headers.get(name).map(|v| v.as_str().to_owned());
            assert_eq!(m.subject.as_str(), "dead.orders");
            assert_eq!(header("rebound-code").as_deref(), Some("PAY_FAILED"));
            assert_eq!(header("rebound-label").as_deref(), Some("L3"));
            assert_eq!(header("rebound-attempts").as_deref(), Some("1"));
            assert!(String::from_utf8_lossy(&m.payload).starts_with("{\"n\":"));
            header("rebound-id").unwrap()
        })
        .collect();
    assert_eq!(ids, stored_ids(&relay));
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}
