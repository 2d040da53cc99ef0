//! Listing dead letters on a Redis store that holds many (`GET /v1/dead-letters` scans them
//! there, until the index of the performance issue): with 11,000 letters, each listing is
//! answered before a client's usual 30 s, with the letters or with 503 and `Retry-After`
//! once the store's work is past its bound (four at a time, 20 s each), eight at once
//! included. What the test asserts is that no request hangs; how fast a listing is belongs to
//! a benchmark.

use crate::support::*;
use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{DeadLetter, Message, OperatorAction, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord, MessageId};
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};
use std::time::Duration;

const LETTERS: u64 = 11_000;

/// A letter shaped like the bundled pipeline's (three failures before the last one).
fn letter(n: u64) -> WriteOp {
    let id = format!("fill-{n:06}");
    let mut message = Message::new(
        id,
        "PAYMENT",
        format!("{{\"order\":{n},\"amount_cents\":1200}}"),
    );
    message.retry.first_delivery = Some(Timestamp::from_millis(1_000));
    for attempt in 1..=3 {
        message.retry.failures.push(FailureRecord {
            attempt,
            at: Timestamp::from_millis(1_000 + u64::from(attempt)),
            code: "PAY_PROCESSING".into(),
            message: "the payment gateway is still processing".into(),
            attrs: [("stage".to_owned(), "store".to_owned())].into(),
            rule: RuleRef::Rule("payment-processing".into()),
            version: Version::from_hash(0x00c0_ffee),
            delay: Some(Duration::from_secs(2)),
        });
    }
    message.retry.attempt = 4;
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new("PAY_PROCESSING", "still processing"),
        label: Label::from(["L1", "L2", "L3"][(n % 3) as usize]),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("payment-processing".into()),
        version: Version::from_hash(0x00c0_ffee),
        at: Timestamp::from_millis(2_000 + n),
    }))
}

#[test]
fn listing_eleven_thousand_letters_on_redis_is_answered_before_a_client_gives_up() {
    let server = TestServer::start();
    let ns = "many";
    let store = RedisStore::connect(&RedisOptions::new(server.url(), ns)).unwrap();
    let ops: Vec<WriteOp> = (1..=LETTERS).map(letter).collect();
    for chunk in ops.chunks(1_000) {
        store.apply(chunk).unwrap();
    }
    // Every tenth replayed, so that `status=replayed` finds some among the rest.
    let replays: Vec<WriteOp> = (1..=LETTERS)
        .step_by(10)
        .map(|n| {
            WriteOp::Replay(
                OperatorAction::new(
                    MessageId::from(format!("fill-{n:06}")),
                    "ops",
                    "test",
                    Timestamp::from_millis(20_000),
                )
                .unwrap(),
            )
        })
        .collect();
    for chunk in replays.chunks(1_000) {
        store.apply(chunk).unwrap();
    }
    drop(store);

    let rules = rules_dir_with("fast");
    let node = Server::start(
        rules.path(),
        &[
            "--store",
            &server.url(),
            "--namespace",
            ns,
            "--node",
            "lister",
            "--rate",
            "1",
        ],
    );
    rebound::outbound::use_ring_by_default();
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let url = node.url("/v1/dead-letters?status=replayed&limit=1000");
    // One alone: the letters (a debug build on a loaded machine may take longer than the
    // bound: then 503, which is the point of the bound).
    let started = std::time::Instant::now();
    let one = client.get(&url).send().expect("an answer within 30 s");
    eprintln!("one listing: {} in {:?}", one.status(), started.elapsed());
    if one.status() == 503 {
        assert!(one.headers().contains_key("retry-after"));
    } else {
        assert_eq!(one.status(), 200);
        let body: serde_json::Value = one.json().unwrap();
        let letters = body["dead_letters"].as_array().unwrap();
        assert_eq!(letters.len(), 1000);
        assert!(letters.iter().all(|l| l["status"] == "replayed"));
        assert_eq!(body["total"], LETTERS / 10, "{}", body["total"]);
    }

    // Eight at once: each is answered, with the letters or with 503 and Retry-After.
    let answers: Vec<(u16, Option<String>)> = std::thread::scope(|s| {
        let all: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let r = client.get(&url).send().expect("an answer within 30 s");
                    let retry = r
                        .headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap().to_owned());
                    (r.status().as_u16(), retry)
                })
            })
            .collect();
        all.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (status, retry_after) in &answers {
        match status {
            200 => {}
            503 => assert!(retry_after.is_some(), "{answers:?}"),
            other => panic!("status {other}: {answers:?}"),
        }
    }
    let (status, _) = node.terminate();
    assert!(status.success());
}
