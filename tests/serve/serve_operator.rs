//! The operator's routes of the real `rebound serve` (operations.md): bulk replay and skip of
//! a filter with the `all` guard and an audit entry per letter, the export as JSON Lines,
//! a message's whole story with every failure, the scheduled retries with retry-now and
//! kill, and the audit log's filters.

use crate::support::*;
use base64::Engine as _;
use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{DeadLetter, Message, ScheduledRetry, SqliteStore, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

fn version() -> Version {
    "0123456789abcdef".parse().unwrap()
}

fn failure(attempt: u32, code: &str) -> FailureRecord {
    FailureRecord {
        attempt,
        at: Timestamp::from_millis(1_000 + u64::from(attempt)),
        code: code.into(),
        message: format!("{code} on attempt {attempt}"),
        attrs: [("host".to_owned(), format!("db-{attempt}"))].into(),
        rule: RuleRef::Rule("payment-processing".into()),
        version: version(),
        delay: Some(Duration::from_millis(100 * u64::from(attempt))),
    }
}

/// A letter of biz `SEEDED` (the bundled pipeline makes none) with `earlier` failures first.
fn letter(id: &str, label: &str, earlier: &[&str], last: &str) -> WriteOp {
    let mut message = Message::new(id, "SEEDED", format!("payload of {id}"));
    for (i, code) in earlier.iter().enumerate() {
        message.retry.failures.push(failure(i as u32 + 1, code));
    }
    message.retry.attempt = earlier.len() as u32 + 1;
    message.retry.first_delivery = Some(Timestamp::from_millis(1_000));
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new(last, "gave up").with_attr("host", "db-last"),
        label: Label::from(label),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("payment-processing".into()),
        version: version(),
        at: Timestamp::from_millis(9_000),
    }))
}

fn serve(data: &Path) -> (Server, tempfile::TempDir) {
    let rules = rules_dir_with("fast");
    // Almost no new orders: the seeded records are what the routes show.
    let server = Server::start(
        rules.path(),
        &["--data", data.to_str().unwrap(), "--rate", "0.01"],
    );
    (server, rules)
}

fn post(server: &Server, path: &str, body: Value) -> (u16, Value) {
    status_and_json(server.post(path).json(&body).send().unwrap())
}

#[test]
fn a_bulk_replay_of_a_thousand_letters_is_guarded_audited_and_the_export_streams_them_all() {
    let data = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(data.path()).unwrap();
        let mut ops: Vec<WriteOp> = (0..1_000)
            .map(|i| letter(&format!("bulk-{i:04}"), "L1", &[], "PAY_PROCESSING"))
            .collect();
        ops.extend((0..10).map(|i| letter(&format!("other-{i}"), "L3", &[], "BAD_JSON")));
        store.apply(&ops).unwrap();
    }
    let (server, _rules) = serve(data.path());

    // The export streams every matching letter, payload in base64, one per line.
    let export = server
        .get("/v1/dead-letters/export?biz=SEEDED")
        .send()
        .unwrap();
    assert_eq!(export.status().as_u16(), 200);
    let text = export.text().unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1_010);
    let payload = base64::engine::general_purpose::STANDARD
        .decode(lines[0]["payload"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        payload,
        format!("payload of {}", lines[0]["id"].as_str().unwrap()).into_bytes()
    );
    let l1 = server.get_json("/v1/dead-letters?biz=SEEDED&label=L1&limit=1");
    assert_eq!(l1["total"], 1_000, "{l1}");

    // An empty filter is refused without "all": true; blank operator or reason too.
    let (status, body) = post(
        &server,
        "/v1/dead-letters/replay",
        json!({"filter": {}, "operator": "ops", "reason": "everything"}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("\"all\": true"),
        "{body}"
    );
    let (status, _) = post(
        &server,
        "/v1/dead-letters/replay",
        json!({"filter": {"label": "L1"}, "operator": " ", "reason": "x"}),
    );
    assert_eq!(status, 400);

    let (status, body) = post(
        &server,
        "/v1/dead-letters/replay",
        json!({"filter": {"biz": "SEEDED", "label": "L1"}, "operator": "ops", "reason": "gateway back"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["replayed"], 1_000);
    let replayed: BTreeSet<String> = body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(replayed.len(), 1_000);
    assert!(replayed.iter().all(|id| id.starts_with("bulk-")));

    // One audit entry per replayed letter.
    let audit = server.get_json("/v1/audit?operator=ops&action=replay&limit=1000");
    let audited: BTreeSet<String> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(audited, replayed);
    assert_eq!(audit["next"], Value::Null);

    // A second bulk replay finds nothing open; the L3 letters are still there to skip.
    let (_, again) = post(
        &server,
        "/v1/dead-letters/replay",
        json!({"filter": {"biz": "SEEDED", "label": "L1"}, "operator": "ops", "reason": "again"}),
    );
    assert_eq!(again["replayed"], 0, "{again}");
    let (_, skipped) = post(
        &server,
        "/v1/dead-letters/skip",
        json!({"filter": {"q": "other-"}, "operator": "ops", "reason": "poison", "limit": 4}),
    );
    assert_eq!(skipped["skipped"], 4, "{skipped}");
    let status = server.get_json("/v1/dead-letters?biz=SEEDED&status=skipped");
    assert_eq!(status["total"], 4, "{status}");
    let (code, bad) = status_and_json(server.get("/v1/dead-letters?status=gone").send().unwrap());
    assert_eq!(code, 400, "{bad}");
}

#[test]
fn a_message_that_failed_with_four_codes_shows_all_four_in_order_with_attrs() {
    let data = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(data.path()).unwrap();
        store
            .apply(&[letter(
                "four",
                "L2",
                &["NET_TIMEOUT", "DB_LOCK_WAIT", "HTTP_503"],
                "PAY_DECLINED",
            )])
            .unwrap();
    }
    let (server, _rules) = serve(data.path());
    let codes = |failures: &Value| -> Vec<String> {
        failures
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_owned())
            .collect()
    };
    let expected = ["NET_TIMEOUT", "DB_LOCK_WAIT", "HTTP_503", "PAY_DECLINED"];

    let m = server.get_json("/v1/messages/four");
    assert_eq!(m["state"], "dead_lettered", "{m}");
    assert_eq!(m["attempts"], 4);
    assert_eq!(codes(&m["failures"]), expected, "{m}");
    assert_eq!(m["failures"][0]["attrs"]["host"], "db-1");
    assert_eq!(m["failures"][3]["attrs"]["host"], "db-last");
    assert_eq!(m["failures"][1]["delay_ms"], 200);
    assert!(m["failures"][3].get("delay_ms").is_none(), "{m}");
    assert_eq!(m["dead_letters"].as_array().unwrap().len(), 1);

    let listed = server.get_json("/v1/dead-letters?q=four");
    let letter = &listed["dead_letters"][0];
    assert_eq!(codes(&letter["failures"]), expected, "{listed}");
    assert_eq!(letter["failures_dropped"], 0);

    let (status, unknown) = status_and_json(server.get("/v1/messages/nobody").send().unwrap());
    assert_eq!((status, unknown["state"].as_str()), (404, Some("unknown")));
}

#[test]
fn scheduled_retries_are_listed_and_fired_now_or_killed_with_an_audit_trail() {
    let data = tempfile::tempdir().unwrap();
    let in_an_hour = Timestamp::now().saturating_add(Duration::from_secs(3_600));
    {
        let store = SqliteStore::open(data.path()).unwrap();
        let ops: Vec<WriteOp> = ["r-late", "r-soon", "r-kill"]
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let mut m = Message::new(*id, "SEEDED", "{}");
                m.retry.attempt = 2;
                m.retry.first_delivery = Some(Timestamp::now());
                m.retry.failures.push(failure(1, "NET_TIMEOUT"));
                m.retry.failures.push(failure(2, "PAY_PROCESSING"));
                let due = in_an_hour.saturating_add(Duration::from_secs(60 * (3 - i as u64)));
                WriteOp::Schedule(ScheduledRetry::new(m, due))
            })
            .collect();
        store.apply(&ops).unwrap();
    }
    let (server, _rules) = serve(data.path());

    let listed = server.get_json("/v1/retries?biz=SEEDED");
    let ids: Vec<&str> = listed["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["r-kill", "r-soon", "r-late"],
        "soonest first: {listed}"
    );
    let first = &listed["retries"][0];
    assert_eq!(first["attempt"], 2);
    assert_eq!(first["rule"], "payment-processing");
    assert_eq!(first["last_code"], "PAY_PROCESSING");
    let page = server.get_json("/v1/retries?biz=SEEDED&limit=2");
    let next = page["next"].as_str().unwrap().to_owned();
    let rest = server.get_json(&format!("/v1/retries?biz=SEEDED&after={next}"));
    assert_eq!(rest["retries"][0]["id"], "r-late", "{rest}");

    let (status, _) = post(
        &server,
        "/v1/retries/r-soon/now",
        json!({"operator": "", "reason": "x"}),
    );
    assert_eq!(status, 400);
    let (status, _) = post(
        &server,
        "/v1/retries/nobody/now",
        json!({"operator": "ops", "reason": "x"}),
    );
    assert_eq!(status, 404);

    // Killed: dead-lettered at once, reason `killed`, its rule's label, audited.
    let (status, killed) = post(
        &server,
        "/v1/retries/r-kill/kill",
        json!({"operator": "ops", "reason": "poison"}),
    );
    assert_eq!(status, 200, "{killed}");
    assert_eq!(killed["reason"], "killed");
    assert_eq!(
        killed["label"], "L1",
        "payment-processing's label: {killed}"
    );
    assert_eq!(killed["last_code"], "PAY_PROCESSING");
    let m = server.get_json("/v1/messages/r-kill");
    assert_eq!(m["state"], "dead_lettered", "{m}");
    assert_eq!(m["dead_letters"][0]["reason"], "killed");
    assert_eq!(m["audit"][0]["action"], "kill");

    // Fired now: its attempt kept; it leaves the scheduled view once delivered.
    let (status, fired) = post(
        &server,
        "/v1/retries/r-soon/now",
        json!({"operator": "ops", "reason": "dependency back"}),
    );
    assert_eq!(status, 200, "{fired}");
    assert_eq!(fired["attempt"], 2);
    assert!(eventually(|| {
        let m = server.get_json("/v1/messages/r-soon");
        m["state"] != "scheduled" && m["attempts"].as_u64() >= Some(3)
            || m["state"] == "acked"
            || m["state"] == "dead_lettered"
    }));
    let audit = server.get_json("/v1/audit?operator=ops");
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["retry_now", "kill"], "{audit}");
    let still = server.get_json("/v1/retries?biz=SEEDED");
    assert_eq!(still["retries"][0]["id"], "r-late", "{still}");
}
