//! Dead letters over the admin API of the real `rebound serve`: list with filters, replay and
//! skip with operator and reason, the token rules, and the audit log in the real SQLite file.

use crate::support::*;
use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{
    AuditFilter, DeadLetter, DeadLetterStatus, Message, SqliteStore, Store, WriteOp,
};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::Failure;
use serde_json::{Value, json};
use std::path::Path;

fn letter(id: &str, biz: &str, label: &str, code: &str) -> WriteOp {
    let mut message = Message::new(id, biz, &br#"{"order":1}"#[..]).with_header("source", "test");
    message.retry.attempt = 4;
    message.retry.first_delivery = Some(Timestamp::from_millis(1_000));
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new(code, "still failing"),
        label: Label::from(label),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("payment-processing".into()),
        version: "0123456789abcdef".parse::<Version>().unwrap(),
        at: Timestamp::from_millis(9_000),
    }))
}

fn seed_store(data: &Path) {
    let store = SqliteStore::open(data).unwrap();
    store
        .apply(&[
            letter("order-1", "PAYMENT", "L1", "PAY_PROCESSING"),
            letter("order-2", "ORDER", "L3", "BAD_JSON"),
            letter("order-3", "PAYMENT", "L1", "PAY_PROCESSING"),
        ])
        .unwrap();
}

fn ids(page: &Value) -> Vec<String> {
    page["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn dead_letters_are_listed_filtered_replayed_and_skipped_with_an_audit_trail() {
    let data = tempfile::tempdir().unwrap();
    seed_store(data.path());
    let rules = rules_dir_with("fast");
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "s3cret\n").unwrap();
    let server = Server::start(
        rules.path(),
        &[
            "--data",
            data.path().to_str().unwrap(),
            "--token-file",
            token.path().to_str().unwrap(),
        ],
    );

    let all = server.get_json("/v1/dead-letters");
    assert_eq!(ids(&all), ["order-3", "order-2", "order-1"], "{all}");
    let first = &all["dead_letters"][2];
    for key in [
        "biz",
        "payload",
        "headers",
        "label",
        "reason",
        "last_code",
        "last_message",
        "attempts",
        "rule",
        "rule_set_version",
    ] {
        assert!(!first[key].is_null(), "{key} missing in {first}");
    }
    assert_eq!(
        ids(&server.get_json("/v1/dead-letters?label=L1")),
        ["order-3", "order-1"]
    );
    assert_eq!(
        ids(&server.get_json("/v1/dead-letters?biz=ORDER")),
        ["order-2"]
    );
    assert_eq!(
        ids(&server.get_json("/v1/dead-letters?code=PAY_PROCESSING&limit=1")),
        ["order-3"]
    );

    let act = json!({ "operator": "alice", "reason": "gateway fixed" });
    let r = server
        .post("/v1/dead-letters/order-1/replay")
        .json(&act)
        .send()
        .unwrap();
    assert_eq!(r.status(), 401, "a write without the token");

    let authed = |path: &str, body: &Value| {
        server
            .post(path)
            .bearer_auth("s3cret")
            .json(body)
            .send()
            .unwrap()
    };
    let (status, body) = status_and_json(authed(
        "/v1/dead-letters/order-1/replay",
        &json!({ "operator": "alice" }),
    ));
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("reason"), "{body}");
    let (status, body) = status_and_json(authed(
        "/v1/dead-letters/order-1/replay",
        &json!({ "operator": " ", "reason": "x" }),
    ));
    assert_eq!(status, 400, "{body}");

    let (status, body) = status_and_json(authed("/v1/dead-letters/order-1/replay", &act));
    assert_eq!(status, 200, "{body}");
    let (status, _) = status_and_json(authed("/v1/dead-letters/order-1/replay", &act));
    assert_eq!(status, 409, "a replayed letter cannot be replayed again");
    let (status, body) = status_and_json(authed(
        "/v1/dead-letters/order-2/skip",
        &json!({ "operator": "bob", "reason": "test order" }),
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "skipped");
    let (status, _) = status_and_json(authed("/v1/dead-letters/nope/skip", &act));
    assert_eq!(status, 404);

    let (code, _) = server.terminate();
    assert!(code.success());
    let store = SqliteStore::open(data.path()).unwrap();
    let letters = store.dead_letters(&Default::default()).unwrap().items;
    let status_of = |id: &str| {
        letters
            .iter()
            .find(|d| d.letter.message.id.as_str() == id)
            .unwrap()
            .status
    };
    assert_eq!(status_of("order-1"), DeadLetterStatus::Replayed);
    assert_eq!(status_of("order-2"), DeadLetterStatus::Skipped);
    assert_eq!(status_of("order-3"), DeadLetterStatus::Dead);
    let audit = store
        .audit_log(&AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .unwrap()
        .items;
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(
        audit
            .iter()
            .any(|a| a.operator == "alice" && a.reason == "gateway fixed")
    );
    assert!(
        audit
            .iter()
            .any(|a| a.operator == "bob" && a.reason == "test order")
    );
    assert!(
        store
            .scheduled()
            .unwrap()
            .iter()
            .any(|(id, _)| id.as_str() == "order-1"),
        "the replay is scheduled"
    );
}
