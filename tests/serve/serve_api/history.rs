//! The rule history with files: `GET /v1/rules/history/{version}` for the last 50 accepted
//! versions, and `POST /v1/rules/rollback` with `{"version": V}` back to one of them, written
//! and recorded as a rollback; in a process of its own and on a shared Redis store.

use crate::support::*;
use rebound_store_redis::TestServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// Pushes fixture `name` (with `If-Match` of the version in force, so a push on a node that
/// has not caught up is refused rather than lost); returns its version.
fn push(server: &Server, name: &str) -> String {
    let current = server.version();
    let r = server
        .put("/v1/rules")
        .header("If-Match", current)
        .json(&push_body(name))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "{name}: {body}");
    body["version"].as_str().unwrap().to_string()
}

fn rollback(server: &Server, body: &Value) -> (u16, Value) {
    status_and_json(server.post("/v1/rules/rollback").json(body).send().unwrap())
}

fn files_json(name: &str) -> Value {
    json!(files_of(name))
}

fn dir_files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// What every mode must do, on `first` (where the pushes go) and `other` (which may be the
/// same process, or another node of the fleet).
fn three_versions_a_diff_and_a_rollback_to_the_first(first: &Server, other: &Server) {
    let v1 = push(first, "slow");
    let v2 = push(first, "pair-a");
    let v3 = push(first, "pair-b");
    assert!(eventually(|| other.version() == v3));

    for (version, name) in [(&v1, "slow"), (&v2, "pair-a"), (&v3, "pair-b")] {
        let kept = other.get_json(&format!("/v1/rules/history/{version}"));
        assert_eq!(kept["version"], version.as_str());
        assert_eq!(kept["files"], files_json(name), "{name}");
    }

    let (status, body) = rollback(other, &json!({ "version": v1 }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], v1.as_str());
    for node in [first, other] {
        assert!(eventually(|| node.version() == v1), "{}", node.base);
        let rules = node.get_json("/v1/rules");
        assert_eq!(rules["files"], files_json("slow"));
        assert_eq!(node.payment_delay_ms(), Some(200));
        let history = node.get_json("/v1/rules/history");
        assert_eq!(history[0]["version"], v1.as_str(), "{history:#}");
        assert_eq!(history[0]["source"], "rollback", "{history:#}");
        assert_eq!(history[0]["result"], "accepted");
        // The paths follow the set in force.
        assert_eq!(node.get_json("/v1/paths")["version"], v1.as_str());
    }

    // Versions not kept: 404, and nothing changes.
    let unknown = "0123456789abcdef";
    let r = other
        .get(&format!("/v1/rules/history/{unknown}"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains(unknown), "{body}");
    let (status, body) = rollback(other, &json!({ "version": unknown }));
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains(unknown), "{body}");
    let r = other.get("/v1/rules/history/not-a-version").send().unwrap();
    assert_eq!(status_and_json(r).0, 404);
    // A malformed one is the client's mistake, and the message names the field.
    for bad in [json!({ "version": 5 }), json!({ "version": "v1" })] {
        let (status, body) = rollback(other, &bad);
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("'version'"),
            "{body}"
        );
    }
    assert_eq!(other.version(), v1);

    // A plain rollback now undoes the rollback: back to the set it replaced.
    let (status, body) = rollback(other, &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], v3.as_str());
    assert!(eventually(|| first.version() == v3));
}

#[test]
fn a_rollback_goes_back_to_a_chosen_version_whose_files_the_history_kept() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let start = server.version();
    let kept = server.get_json(&format!("/v1/rules/history/{start}"));
    assert_eq!(kept["files"], files_json("fast"), "the start-up set");

    three_versions_a_diff_and_a_rollback_to_the_first(&server, &server);
    // Written into the rules directory, as any rollback.
    assert_eq!(dir_files(dir.path()), files_of("pair-b"));
    let (status, _) = rollback(&server, &json!({ "version": start }));
    assert_eq!(status, 200);
    assert_eq!(dir_files(dir.path()), files_of("fast"));
}

/// A node of a fleet in namespace `ns` on `server`, on its own copy of fixture `rules`.
fn node(server: &TestServer, ns: &str, name: &str) -> (Server, tempfile::TempDir) {
    let dir = rules_dir_with("fast");
    let url = server.url();
    let args = [
        "--store",
        &url,
        "--namespace",
        ns,
        "--node",
        name,
        "--lease",
        "3s",
        "--rate",
        "50",
    ];
    (Server::start(dir.path(), &args), dir)
}

#[test]
fn on_a_shared_store_the_history_and_the_rollback_are_the_fleets() {
    let redis = TestServer::start();
    let (a, _da) = node(&redis, "history", "a");
    let (b, dir_b) = node(&redis, "history", "b");
    three_versions_a_diff_and_a_rollback_to_the_first(&a, &b);
    // Each node mirrors the set of record into its rules directory.
    assert!(eventually(|| dir_files(dir_b.path()) == files_of("pair-b")));
}

#[test]
fn a_push_and_a_rollback_record_their_operator_and_reason_in_the_history() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let mut body = push_body("slow");
    body["operator"] = json!("alice");
    body["reason"] = json!("slower payments while the gateway recovers");
    let (status, pushed) = status_and_json(server.put("/v1/rules").json(&body).send().unwrap());
    assert_eq!(status, 200, "{pushed}");
    let history = server.get_json("/v1/rules/history");
    assert_eq!(history[0]["version"], pushed["version"], "{history:#}");
    assert_eq!(history[0]["source"], "push");
    assert_eq!(history[0]["operator"], "alice", "{history:#}");
    assert_eq!(
        history[0]["reason"],
        "slower payments while the gateway recovers"
    );
    // The start-up set was loaded from the directory: nobody to name.
    assert!(history[1].get("operator").is_none(), "{history:#}");

    let (status, back) = rollback(
        &server,
        &json!({ "operator": "bob", "reason": "the gateway is fine" }),
    );
    assert_eq!(status, 200, "{back}");
    let history = server.get_json("/v1/rules/history");
    assert_eq!(history[0]["source"], "rollback", "{history:#}");
    assert_eq!(history[0]["operator"], "bob");
    assert_eq!(history[0]["reason"], "the gateway is fine");

    // One without the other, or a blank one, is refused as the dead-letter actions refuse it;
    // nothing changes.
    let version = server.version();
    for (operator, reason, missing) in [
        (json!("carol"), Value::Null, "'reason'"),
        (json!(" "), json!("why"), "'operator'"),
    ] {
        let (status, answer) =
            rollback(&server, &json!({ "operator": operator, "reason": reason }));
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(missing),
            "{answer}"
        );
        let mut body = push_body("pair-a");
        body["operator"] = operator;
        body["reason"] = reason;
        let (status, answer) = status_and_json(server.put("/v1/rules").json(&body).send().unwrap());
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(missing),
            "{answer}"
        );
    }
    assert_eq!(server.version(), version);
}
