//! Three `rebound serve` nodes on one shared Redis (each test starts its own `redis-server`):
//! a push on one node reaches every node within 2 s, even with the subscribers' connections
//! killed between pushes (polling covers what pub/sub misses); a stale `If-Match` is 409 on
//! any node; `/v1/nodes` lists the fleet and `/readyz` says whether the store answers; a
//! dead letter replayed through one node is delivered by the fleet and acked; the adaptive
//! state is the fleet's (`adaptive_scope`), the node's own while the store is down, and the
//! fleet's again once it is back.

use crate::support::*;
use rebound::pipeline::faults::{Fault, Faults};
use rebound::pipeline::orders::{OrderGen, Shape, order_id};
use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{Fate, MessageId, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::Failure;
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A node of the fleet in namespace `ns`, on its own copy of fixture `rules`.
fn node(server: &TestServer, ns: &str, name: &str, rules: &str) -> (Server, tempfile::TempDir) {
    let dir = rules_dir_with(rules);
    let url = server.url();
    let node = Server::start(
        dir.path(),
        &[
            "--store",
            &url,
            "--namespace",
            ns,
            "--node",
            name,
            // Long enough that a node busy under a loaded test run still heartbeats within
            // it: this test is of the rules, not of leases.
            "--lease",
            "3s",
            "--rate",
            "50",
        ],
    );
    (node, dir)
}

/// Waits (up to `limit`) until every node runs `version`; returns how long it took.
fn converge(nodes: &[&Server], version: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let versions: Vec<String> = nodes.iter().map(|n| n.version()).collect();
        if versions.iter().all(|v| v == version) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "the fleet did not converge on {version} within {limit:?}: {versions:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn push(node: &Server, files: &str, if_match: &str) -> (u16, Value) {
    status_and_json(
        node.put("/v1/rules")
            .header("If-Match", if_match)
            .json(&push_body(files))
            .send()
            .unwrap(),
    )
}

#[test]
fn a_push_on_one_node_reaches_every_node_and_a_stale_if_match_is_409_on_any() {
    let server = TestServer::start();
    let ns = "rules";
    let (a, dir_a) = node(&server, ns, "a", "fast");
    let (b, _db) = node(&server, ns, "b", "fast");
    let (c, _dc) = node(&server, ns, "c", "slow");
    // c started with other files: the store's set (seeded by a) wins and is mirrored.
    let first = a.version();
    converge(&[&a, &b, &c], &first, Duration::from_secs(3));

    let mut current = first.clone();
    for (round, (from, files)) in [(&b, "slow"), (&c, "fast"), (&a, "slow")]
        .iter()
        .enumerate()
    {
        if round == 1 {
            // Drop every subscriber: the next push reaches the fleet by polling.
            let mut redis = server.client();
            let killed: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query(&mut redis)
                .unwrap();
            assert!(killed >= 1, "no subscriber to kill");
        }
        let (status, body) = push(from, files, &current);
        assert_eq!(status, 200, "round {round}: {body}");
        let version = body["version"].as_str().unwrap().to_string();
        let took = converge(&[&a, &b, &c], &version, Duration::from_secs(2));
        eprintln!("round {round}: converged in {took:?}");
        // The version of before is stale now, on every node.
        for n in [&a, &b, &c] {
            let (status, body) = push(n, "fast", &current);
            assert_eq!(status, 409, "round {round}: {body}");
        }
        current = version;
    }

    // Every node reports what it runs on /v1/nodes.
    let nodes = a.get_json("/v1/nodes");
    let names: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"], "{nodes:#}");
    assert!(
        eventually(|| {
            a.get_json("/v1/nodes")
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["rules_version"] == current.as_str())
        }),
        "{:#}",
        a.get_json("/v1/nodes")
    );
    // The history is the fleet's: the same on every node, with the spec's source names (the
    // pushes, then the set the first node brought from its files).
    let history = |n: &Server| n.get_json("/v1/rules/history");
    assert_eq!(history(&a), history(&c));
    let sources: Vec<Value> = history(&a)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source"].clone())
        .collect();
    assert_eq!(sources.first(), Some(&json!("push")), "{sources:?}");
    assert_eq!(sources.last(), Some(&json!("file")), "{sources:?}");
    let versions: Vec<String> = history(&a)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_str().unwrap().to_owned())
        .collect();

    // A rollback on any node goes back along the fleet's history, and reaches every node.
    let rollback = |n: &Server| {
        status_and_json(
            n.post("/v1/rules/rollback")
                .json(&json!({}))
                .send()
                .unwrap(),
        )
    };
    let (status, body) = rollback(&b);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], versions[1].as_str(), "{body}");
    converge(&[&a, &b, &c], &versions[1], Duration::from_secs(2));
    let (status, body) = rollback(&c);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["version"],
        versions[2].as_str(),
        "repeated rollbacks walk back: {body}"
    );
    converge(&[&a, &b, &c], &versions[2], Duration::from_secs(2));
    assert_eq!(history(&b)[0]["source"], "rollback");

    // A file edited in one node's rules directory is pushed, and reaches every node.
    let before = a.version();
    let file = std::fs::read_dir(dir_a.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "yaml"))
        .expect("a rule file");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("\n# edited on node a\n");
    std::fs::write(&file, text).unwrap();
    assert!(
        eventually(|| a.version() != before),
        "node a did not reload its edit"
    );
    let edited = a.version();
    converge(&[&a, &b, &c], &edited, Duration::from_secs(2));
    assert_eq!(history(&c)[0]["source"], "file");
}

/// The version every node lists on `node`'s `/v1/nodes` (None while they differ or a node is
/// missing).
fn listed_version(node: &Server, nodes: usize) -> Option<String> {
    let listed = node.get_json("/v1/nodes");
    let versions: Vec<&str> = listed
        .as_array()?
        .iter()
        .filter_map(|n| n["rules_version"].as_str())
        .collect();
    (versions.len() == nodes && versions.iter().all(|v| *v == versions[0]))
        .then(|| versions[0].to_owned())
}

#[test]
fn v1_nodes_on_every_node_lists_a_pushed_version_for_every_node_within_2s() {
    let server = TestServer::start();
    let ns = "listed";
    // A long lease: a heartbeat (every lease / 3) comes long after the push, so only a node
    // that reports its version as it adopts the set can be listed with it in time.
    let start = |name| {
        let dir = rules_dir_with("fast");
        let node = Server::start(
            dir.path(),
            &[
                "--store",
                &server.url(),
                "--namespace",
                ns,
                "--node",
                name,
                "--lease",
                "60s",
                "--rate",
                "20",
            ],
        );
        (node, dir)
    };
    let (a, _da) = start("a");
    let (b, _db) = start("b");
    let (c, _dc) = start("c");
    let first = a.version();
    assert!(
        eventually(|| listed_version(&c, 3).as_deref() == Some(first.as_str())),
        "{:#}",
        c.get_json("/v1/nodes")
    );

    let (status, body) = push(&a, "slow", &first);
    assert_eq!(status, 200, "{body}");
    let pushed = body["version"].as_str().unwrap().to_string();
    let at = Instant::now();
    // The spec's 2 s, and as much again for a loaded machine: still far below a heartbeat.
    let limit = Duration::from_secs(4);
    while listed_version(&c, 3).as_deref() != Some(pushed.as_str()) {
        assert!(
            at.elapsed() < limit,
            "{limit:?} after the push, node c lists {:#}",
            c.get_json("/v1/nodes")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "every node listed {pushed} {:?} after the push",
        at.elapsed()
    );
    for n in [&a, &b] {
        assert_eq!(listed_version(n, 3).as_deref(), Some(pushed.as_str()));
    }
    // And rebound_rules_version_info says the same on every node.
    for n in [&a, &b, &c] {
        let metrics = n.get("/metrics").send().unwrap().text().unwrap();
        assert!(
            metrics.contains(&format!(
                "rebound_rules_version_info{{version=\"{pushed}\"}} 1"
            )),
            "{metrics}"
        );
    }
}

#[test]
fn readyz_says_503_while_the_store_is_down_and_200_once_it_is_back() {
    let mut server = TestServer::start();
    let (a, _d) = node(&server, "ready", "a", "fast");
    let (status, body) = status_and_json(a.get("/readyz").send().unwrap());
    assert_eq!(
        (status, body.clone()),
        (200, json!({"store": "ok"})),
        "{body}"
    );
    server.kill();
    assert!(
        eventually(|| a.get("/readyz").send().unwrap().status() == 503),
        "/readyz stayed 200 with the store down"
    );
    let (_, body) = status_and_json(a.get("/readyz").send().unwrap());
    assert_eq!(body["store"], "unreachable", "{body}");
    assert!(
        body["since"].as_str().is_some_and(|s| s.ends_with('Z')),
        "{body}"
    );
    assert_eq!(a.get("/healthz").send().unwrap().status(), 200);
    server.restart();
    assert!(
        eventually(|| a.get("/readyz").send().unwrap().status() == 200),
        "/readyz did not come back"
    );
}

/// What `node`'s `/v1/overview` and `/metrics` say of the adaptive scope, when they agree.
fn adaptive_scope(node: &Server) -> Option<String> {
    let overview = node.get("/v1/overview").send().ok()?.json::<Value>().ok()?;
    let scope = overview["adaptive_scope"].as_str()?.to_owned();
    let metrics = node.get("/metrics").send().ok()?.text().ok()?;
    metrics
        .contains(&format!("rebound_adaptive_scope{{scope=\"{scope}\"}} 1"))
        .then_some(scope)
}

#[test]
fn the_adaptive_state_is_the_fleets_falls_back_to_the_nodes_with_the_store_down_and_rejoins() {
    let mut server = TestServer::start();
    let (a, _da) = node(&server, "adaptive", "a", "fast");
    let (b, _db) = node(&server, "adaptive", "b", "fast");
    for n in [&a, &b] {
        assert!(
            eventually(|| adaptive_scope(n).as_deref() == Some("fleet")),
            "{:#}",
            n.get_json("/v1/overview")
        );
    }
    // Every node's row carries its view of the breakers (none has opened: empty lists).
    assert!(
        eventually(|| {
            let nodes = a.get_json("/v1/nodes");
            nodes.as_array().is_some_and(|rows| {
                rows.len() == 2 && rows.iter().all(|r| r["breakers"].is_array())
            })
        }),
        "{:#}",
        a.get_json("/v1/nodes")
    );
    server.kill();
    for n in [&a, &b] {
        assert!(
            eventually(|| adaptive_scope(n).as_deref() == Some("node")),
            "the scope stayed the fleet's with the store down"
        );
    }
    server.restart();
    for n in [&a, &b] {
        assert!(
            eventually(|| adaptive_scope(n).as_deref() == Some("fleet")),
            "the node did not rejoin the fleet's state"
        );
    }
}

#[test]
fn a_letter_replayed_through_another_node_is_delivered_by_the_fleet_and_acked() {
    let server = TestServer::start();
    let ns = "replay";
    let (a, _da) = node(&server, ns, "a", "fast");
    let (b, _db) = node(&server, ns, "b", "fast");
    // An order far beyond what the spouts reach, whose first delivery meets no fault: it was
    // dead-lettered on node a (its letter written as a's journal writes one).
    let faults = Faults::default();
    let mut orders = OrderGen::new(faults.seed, faults.malformed, faults.invalid);
    let n = (900_000..)
        .find(|&n| {
            orders.shape(n) == Shape::Good
                && matches!(faults.roll(n, orders.biz(n), 1), Fault::None)
        })
        .unwrap();
    let message = orders.message(n);
    let id = order_id(n);
    let store = RedisStore::connect(&RedisOptions::new(server.url(), ns)).unwrap();
    let letter = DeadLetter {
        message,
        failure: Failure::new("NET_TIMEOUT", "no answer from the order service"),
        label: Label::from("L2"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("net".into()),
        version: Version::from_hash(1),
        at: Timestamp::now(),
    };
    store
        .apply(&[WriteOp::DeadLetter(Box::new(letter))])
        .unwrap();
    let listed = b.get_json("/v1/dead-letters?code=NET_TIMEOUT&limit=1000");
    assert!(
        listed.to_string().contains(&id),
        "b does not list a's letter: {listed}"
    );

    let (status, body) = status_and_json(
        b.post(&format!("/v1/dead-letters/{id}/replay"))
            .json(&json!({"operator": "ops", "reason": "the order service is back"}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let acked = eventually(|| {
        store
            .known_fates(&[MessageId::from(id.as_str())])
            .unwrap()
            .first()
            .is_some_and(|(_, f)| *f == Fate::Acked)
    });
    assert!(acked, "the replayed order was not acked by the fleet");
    assert_eq!(
        rebound::pipeline::fleet::effects::held(&store, "orders", &[id.as_str()]).unwrap(),
        [true]
    );
    let letters = a.get_json("/v1/dead-letters?code=NET_TIMEOUT&limit=1000");
    let mine: Vec<&Value> = letters["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l.to_string().contains(&id))
        .collect();
    assert!(
        mine.iter().any(|l| l["status"] == "replayed"),
        "a does not see the letter replayed: {mine:?}"
    );
}

#[test]
fn a_set_of_record_that_does_not_compile_here_is_not_run_and_is_reported() {
    use rebound_store_redis::RuleRecord;
    let server = TestServer::start();
    let ns = "broken";
    let (a, _da) = node(&server, ns, "a", "fast");
    let running = a.version();
    // A set the nodes cannot compile lands in the store (written by a newer build, say).
    let store = RedisStore::connect(&RedisOptions::new(server.url(), ns)).unwrap();
    let broken = RuleRecord {
        version: rebound_engine::Version::from_hash(0xdead_beef),
        files: vec![(
            "10-bad.yaml".into(),
            "version: 1\nrules: [ {id: x, retry: nope} ]\n".into(),
        )],
        source: rebound_engine::reload::Source::Push,
        at: Timestamp::now(),
    };
    store.push_rules(None, &broken).unwrap();
    let reported = eventually(|| {
        a.get_json("/v1/nodes")[0]["rules_errors"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    });
    assert!(reported, "{:#}", a.get_json("/v1/nodes"));
    assert_eq!(a.version(), running, "the node keeps the set it runs");
    let metrics = a.get("/metrics").send().unwrap().text().unwrap();
    assert!(
        metrics.contains("rebound_rules_reloads_total{result=\"rejected\"} 1"),
        "{metrics}"
    );
}

/// A fleet that has served 20 million orders (2,000/s for almost three hours) before this node
/// starts: its report would read the fate of every one of them (a round trip per 512). A
/// SIGTERM must still stop the node within the stop's bound (the node exits 2 past it), and
/// `serve` prints no report, so its stop does not read one.
#[test]
fn sigterm_stops_a_fleet_node_within_the_bound_however_long_the_fleet_ran() {
    let server = TestServer::start();
    let ns = "long";
    let store = RedisStore::connect(&RedisOptions::new(server.url(), ns)).unwrap();
    let earlier = json!({
        "node": "earlier",
        "started_ms": 1,
        "elapsed_ms": 10_000_000,
        "emitted_high": 20_000_000u64,
        "stats": rebound::pipeline::db::SessionStats::default(),
        "ended": "interrupted",
    });
    store
        .put_doc("sessions", "earlier#1", &earlier.to_string())
        .unwrap();
    let (a, _d) = node(&server, ns, "a", "fast");
    assert!(
        eventually(|| {
            a.get_json("/v1/nodes")
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["partitions"].as_array().is_some_and(|p| !p.is_empty()))
        }),
        "the node took no partition: {}",
        a.get_json("/v1/nodes")
    );
    // Running a while at its rate, with trees in flight.
    std::thread::sleep(Duration::from_secs(2));
    let (status, stderr, took) = a.terminate_within(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "took {took:?}: {stderr}");
    assert!(!stderr.contains("did not finish"), "{stderr}");
}
