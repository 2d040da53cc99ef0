//! Labels that redrive, on the real `rebound serve` over its SQLite store: a letter is
//! redriven once its label's `after` has passed (audited by `rebound`), an operator's skip
//! before then cancels it, and a redrive that comes due while the process is down (killed by
//! PID) happens at the next start.

use crate::support::*;
use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{DeadLetter, Message, SqliteStore, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::Failure;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The `fast` fixture, with L1 redriven once, 2 s after its letter.
fn rules() -> tempfile::TempDir {
    let dir = rules_dir_with("fast");
    std::fs::write(
        dir.path().join("50-labels.yaml"),
        "version: 1\nlabels:\n  L1:\n    description: redriven once\n    redrive: { after: 2s, max: 1 }\n",
    )
    .unwrap();
    dir
}

fn seed(data: &Path, ids: &[&str]) {
    let store = SqliteStore::open(data).unwrap();
    let ops: Vec<WriteOp> = ids
        .iter()
        .map(|id| {
            let mut message = Message::new(*id, "SEEDED", "{}");
            message.retry.attempt = 3;
            message.retry.first_delivery = Some(Timestamp::now());
            WriteOp::DeadLetter(Box::new(DeadLetter {
                message,
                failure: Failure::new("PAY_PROCESSING", "still processing"),
                label: Label::from("L1"),
                reason: GiveUpReason::MaxRetries,
                rule: RuleRef::Rule("payment-processing".into()),
                version: "0123456789abcdef".parse::<Version>().unwrap(),
                at: Timestamp::now(),
            }))
        })
        .collect();
    store.apply(&ops).unwrap();
}

fn serve(rules: &Path, data: &Path) -> Server {
    Server::start(rules, &["--data", data.to_str().unwrap(), "--rate", "0.01"])
}

/// The audit lines of message `id`, oldest first, as (operator, reason).
fn audit(server: &Server, id: &str) -> Vec<(String, String)> {
    let a = server.get_json(&format!("/v1/audit?message={id}"));
    let mut lines: Vec<(String, String)> = a["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["operator"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    lines.reverse();
    lines
}

#[test]
fn a_letter_is_redriven_after_its_labels_wait_and_a_skip_before_then_cancels_it() {
    let data = tempfile::tempdir().unwrap();
    let rules = rules();
    seed(data.path(), &["kept", "skipped"]);
    let seeded = Instant::now();
    let server = serve(rules.path(), data.path());
    let (status, body) = status_and_json(
        server
            .post("/v1/dead-letters/skipped/skip")
            .json(&json!({"operator": "ops", "reason": "handled by hand"}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        seeded.elapsed() < Duration::from_secs(2),
        "the skip came too late to test"
    );
    // Not before its wait: the letter is still open a second in.
    let m = server.get_json("/v1/messages/kept");
    assert_eq!(m["state"], "dead_lettered", "{m}");

    assert!(
        eventually(|| !audit(&server, "kept").is_empty()),
        "never redriven"
    );
    assert!(seeded.elapsed() >= Duration::from_secs(2));
    assert_eq!(
        audit(&server, "kept"),
        [("rebound".to_owned(), "redrive 1/1 (label L1)".to_owned())]
    );
    // The skipped one stays skipped: only the operator's line.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        audit(&server, "skipped"),
        [("ops".to_owned(), "handled by hand".to_owned())]
    );
    let metrics = server.get("/metrics").send().unwrap().text().unwrap();
    let redrives: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("rebound_redrives_total"))
        .collect();
    assert!(
        redrives
            .iter()
            .any(|l| l.contains("label=\"L1\"") && !l.ends_with(" 0")),
        "{redrives:?}"
    );
}

#[test]
fn a_redrive_due_while_the_process_was_down_happens_after_the_restart() {
    let data = tempfile::tempdir().unwrap();
    let rules = rules();
    seed(data.path(), &["crash"]);
    let seeded = Instant::now();
    let server = serve(rules.path(), data.path());
    // Killed before the redrive is due.
    assert!(
        seeded.elapsed() < Duration::from_secs(2),
        "the server started too slowly to test"
    );
    server.kill9();
    while seeded.elapsed() < Duration::from_millis(2_500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let server = serve(rules.path(), data.path());
    assert!(
        eventually(|| audit(&server, "crash")
            == [("rebound".to_owned(), "redrive 1/1 (label L1)".to_owned())]),
        "{:?}",
        audit(&server, "crash")
    );
    let letters: Value = server.get_json("/v1/dead-letters?q=crash");
    assert_eq!(
        letters["dead_letters"][0]["redrives"], 0,
        "the replayed letter: {letters}"
    );
}

#[test]
fn open_letters_past_their_sla_are_overdue_and_past_their_expiry_expired() {
    let data = tempfile::tempdir().unwrap();
    let rules = rules_dir_with("fast");
    std::fs::write(
        rules.path().join("50-labels.yaml"),
        "version: 1\nlabels:\n  L1:\n    sla: 1s\n    expire: 3s\n",
    )
    .unwrap();
    seed(data.path(), &["late", "later"]);
    let seeded = Instant::now();
    let server = serve(rules.path(), data.path());
    let overdue = |s: &Server| -> Vec<String> {
        let page = s.get_json("/v1/dead-letters?overdue=true&biz=SEEDED");
        page["dead_letters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        seeded.elapsed() < Duration::from_secs(1),
        "too slow to see them before the SLA"
    );
    assert!(overdue(&server).is_empty());
    assert!(eventually(|| overdue(&server) == ["later", "late"]));
    let metrics = server.get("/metrics").send().unwrap().text().unwrap();
    assert!(
        metrics.lines().any(
            |l| l.starts_with("rebound_dead_letters_overdue{label=\"L1\"}") && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("rebound_dead_letters_open{label=\"L1\"}"),
        "{metrics}"
    );

    // Past `expire`: expired, kept whole, audited by `rebound`, and no longer open.
    assert!(eventually(|| {
        let m = server.get_json("/v1/dead-letters?biz=SEEDED&status=expired");
        m["total"] == 2
    }));
    assert!(seeded.elapsed() >= Duration::from_secs(3));
    assert_eq!(
        audit(&server, "late"),
        [(
            "rebound".to_owned(),
            "expired after 3s (label L1)".to_owned()
        )]
    );
    assert!(overdue(&server).is_empty());
    let m = server.get_json("/v1/messages/late");
    assert_eq!(m["dead_letters"][0]["status"], "expired", "{m}");
    assert_eq!(m["dead_letters"][0]["payload"], "{}", "{m}");
}
