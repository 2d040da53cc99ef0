//! A message's page shows its payload (text, or hex when it is not UTF-8) and every failure
//! the store keeps, not only those of its last cycle: a message dead-lettered, redriven and
//! dead-lettered again has six failures in each letter, and its page lists all twelve, in
//! order, each with its cycle.
//!
//! The letters are written into the run's store before it starts, as the runtime writes them
//! (a letter, its redrive, the second letter), through the store API.

use super::check::{assert_no_console_errors, open, screenshot};
use super::server::Console;
use super::webdriver::Browser;
use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{Message, OperatorAction, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};
use serde_json::json;
use std::time::Duration;

const REDRIVEN: &str = "order-redriven-1";
const PAYLOAD: &str = "{\"order\": 4711, \"sku\": \"B-12\", \"qty\": 3}";
const BINARY: &str = "order-binary-1";

/// A letter of `id` for a cycle of `failures` failures (the last ends it), which ended at `end`.
fn letter(id: &str, payload: &[u8], failures: u32, end: Timestamp, redrives: u32) -> DeadLetter {
    let rule = RuleRef::Rule("db-lock".into());
    let mut message = Message::new(id, "ORDER", payload.to_vec());
    let start = end.saturating_sub(Duration::from_secs(u64::from(failures)));
    message.retry.first_delivery = Some(start);
    message.retry.redrives = redrives;
    for attempt in 1..failures {
        message.retry.failures.push(FailureRecord {
            attempt,
            at: start + Duration::from_secs(u64::from(attempt)),
            code: "DB_LOCK".into(),
            message: format!(
                "cycle {} attempt {attempt}: the row is locked",
                redrives + 1
            ),
            attrs: Default::default(),
            rule: rule.clone(),
            version: Version::from_hash(1),
            delay: Some(Duration::from_millis(500)),
        });
    }
    message.retry.attempt = failures;
    DeadLetter {
        message,
        failure: Failure::new("DB_LOCK", format!("cycle {}: gave up", redrives + 1)),
        label: Label::from("L2"),
        reason: GiveUpReason::MaxRetries,
        rule,
        version: Version::from_hash(1),
        at: end,
    }
}

/// A message dead-lettered, redriven and dead-lettered again (six failures each time), and a
/// message whose payload is not UTF-8.
fn letters() -> Vec<WriteOp> {
    let now = Timestamp::now();
    let first = now.saturating_sub(Duration::from_secs(60));
    let redrive = OperatorAction::new(
        REDRIVEN.into(),
        "rebound",
        "redrive 1/1 (label L2)",
        first + Duration::from_secs(1),
    )
    .expect("an action");
    vec![
        WriteOp::DeadLetter(Box::new(letter(REDRIVEN, PAYLOAD.as_bytes(), 6, first, 0))),
        WriteOp::Redrive(redrive),
        WriteOp::DeadLetter(Box::new(letter(REDRIVEN, PAYLOAD.as_bytes(), 6, now, 1))),
        WriteOp::DeadLetter(Box::new(letter(
            BINARY,
            &[0xff, 0xfe, 0x00, 0x41],
            1,
            now,
            0,
        ))),
    ]
}

#[test]
fn a_message_page_shows_its_payload_and_every_failure_of_every_cycle() {
    let console = Console::start_with(letters());
    let m = console.get(&format!("/v1/messages/{REDRIVEN}"));
    let failures = m["failures"].as_array().expect("failures");
    let cycles: Vec<(u64, u64)> = failures
        .iter()
        .map(|f| (f["cycle"].as_u64().unwrap(), f["attempt"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(u64, u64)> = (1..=2).flat_map(|c| (1..=6).map(move |a| (c, a))).collect();
    assert_eq!(cycles, expected, "{m:#}");
    assert_eq!(failures[5]["message"], "cycle 1: gave up");
    assert_eq!(
        m["payload"],
        json!({"encoding": "text", "data": PAYLOAD, "bytes": PAYLOAD.len(), "truncated": false})
    );
    assert_eq!(m["dead_letters"].as_array().map(Vec::len), Some(2), "{m:#}");

    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        &format!("/ui/messages/{REDRIVEN}"),
        "document.getElementById('payload')",
    );
    assert_eq!(browser.wait_for("#payload").text(), PAYLOAD);
    let rows: Vec<String> = browser
        .find_all("#failures tbody tr")
        .iter()
        .map(|r| r.text())
        .collect();
    assert_eq!(rows.len(), 12, "{rows:#?}");
    assert!(rows[0].contains("cycle 1 attempt 1"), "{}", rows[0]);
    assert!(rows[11].contains("cycle 2: gave up"), "{}", rows[11]);
    assert_no_console_errors(&browser, "the message page");
    screenshot(&browser, "message-redriven");

    let m = console.get(&format!("/v1/messages/{BINARY}"));
    assert_eq!(
        m["payload"],
        json!({"encoding": "hex", "data": "fffe0041", "bytes": 4, "truncated": false})
    );
    open(
        &browser,
        &console,
        &format!("/ui/messages/{BINARY}"),
        "document.getElementById('payload')",
    );
    let shown = browser.wait_for("#payload");
    assert_eq!(shown.attribute("data-encoding").as_deref(), Some("hex"));
    assert_eq!(shown.text(), "ff fe 00 41");
    let note = browser.wait_for("#payload-note").text();
    assert!(note.contains("4 bytes") && note.contains("hex"), "{note}");
    assert_eq!(m["failures"].as_array().map(Vec::len), Some(1), "{m}");
    assert_no_console_errors(&browser, "the binary message's page");
}
