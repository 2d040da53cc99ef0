//! A canary on a fleet (release.md, "A fleet runs one canary"): three `rebound serve` nodes
//! on one Redis namespace. A canary put on one node runs on every node (each says its canary
//! version on `/v1/nodes`); its outcomes are the fleet's; a candidate that dead-letters
//! everything is rolled back on the fleet's figures, and the rollback reaches every node
//! within 2 s; the stable set runs on everywhere, and a second canary while one runs is
//! refused on any node.

use crate::support::*;
use rebound_store_redis::TestServer;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A node of namespace `ns` on a copy of release fixture `stable`, 50 new orders a second.
fn node(server: &TestServer, name: &str) -> (Server, tempfile::TempDir) {
    let rules = tempfile::tempdir().unwrap();
    for (file, text) in release_files("stable") {
        std::fs::write(rules.path().join(file), text).unwrap();
    }
    let url = server.url();
    let node = Server::start(
        rules.path(),
        &[
            "--store",
            &url,
            "--namespace",
            "canary",
            "--node",
            name,
            "--lease",
            "3s",
            "--time-scale",
            "100",
            "--rate",
            "50",
        ],
    );
    (node, rules)
}

fn canary(node: &Server) -> Value {
    node.get_json("/v1/rules/canary")
}

#[test]
fn a_canary_runs_on_every_node_and_a_rollback_on_the_fleets_figures_reaches_them_all() {
    let redis = TestServer::start();
    let nodes: Vec<(Server, tempfile::TempDir)> =
        ["a", "b", "c"].iter().map(|n| node(&redis, n)).collect();
    let nodes: Vec<&Server> = nodes.iter().map(|(s, _)| s).collect();
    let stable = nodes[0].version();
    assert!(
        within(DEADLINE, || nodes[0]
            .get_json("/v1/nodes")
            .as_array()
            .unwrap()
            .len()
            == 3),
        "three live nodes: {}",
        nodes[0].get_json("/v1/nodes")
    );
    let body = json!({
        "files": release_files("drop"), "percent": 50, "promote_after": "1h",
        // Enough samples that the fleet's figures, not one node's, decide: each node delivers
        // about 50 a second.
        "guard": {"dead_letter_ratio": "+10%", "min_samples": 150},
    });
    let (status, started) =
        status_and_json(nodes[0].put("/v1/rules/canary").json(&body).send().unwrap());
    assert_eq!(status, 200, "{started}");
    let version = started["version"].as_str().unwrap().to_owned();
    // A second canary is refused on any node while this one runs.
    let (status, refused) =
        status_and_json(nodes[2].put("/v1/rules/canary").json(&body).send().unwrap());
    assert_eq!(status, 409, "{refused}");

    // Every node runs it, and says so on /v1/nodes.
    let runs_everywhere = within(DEADLINE, || {
        let listed = nodes[1].get_json("/v1/nodes");
        let listed = listed.as_array().unwrap();
        listed.len() == 3
            && listed
                .iter()
                .all(|n| n["canary_version"] == version.as_str())
    });
    let ended_early = nodes.iter().any(|n| canary(n)["state"] == "rolled_back");
    assert!(
        runs_everywhere || ended_early,
        "each node's canary version: {}",
        nodes[1].get_json("/v1/nodes")
    );
    for n in &nodes[1..] {
        assert!(
            within(DEADLINE, || canary(n)["version"] == version.as_str()),
            "{}",
            canary(n)
        );
    }

    // Rolled back on the fleet's figures; every node has it rolled back within 2 s of the
    // first.
    let mut first = None;
    assert!(
        within(DEADLINE * 3, || {
            let done = nodes.iter().any(|n| canary(n)["state"] == "rolled_back");
            if done && first.is_none() {
                first = Some(Instant::now());
            }
            done
        }),
        "{}",
        canary(nodes[0])
    );
    let first = first.expect("one node rolled it back");
    assert!(
        within(Duration::from_secs(2), || nodes
            .iter()
            .all(|n| canary(n)["state"] == "rolled_back")),
        "every node within 2 s: {:?}",
        nodes.iter().map(|n| canary(n)).collect::<Vec<_>>()
    );
    assert!(first.elapsed() < Duration::from_secs(4));
    // The figures that decided are the fleet's: more first deliveries in the canary arm than
    // the guard's samples, on every node the same (the record's).
    let figures: Vec<Value> = nodes.iter().map(|n| canary(n)["arms"].clone()).collect();
    assert!(
        figures[0]["canary"]["first_deliveries"].as_u64().unwrap() >= 150,
        "{}",
        figures[0]
    );
    let reason = canary(nodes[0])["reason"].as_str().unwrap().to_owned();
    assert!(reason.starts_with("dead-letter ratio "), "{reason}");
    for n in &nodes {
        assert_eq!(canary(n)["reason"], reason.as_str());
        assert_eq!(n.version(), stable, "the stable set runs on");
    }
    assert!(within(DEADLINE, || {
        nodes[0]
            .get_json("/v1/nodes")
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["canary_version"].is_null())
    }));
}
