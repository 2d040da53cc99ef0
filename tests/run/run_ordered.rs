//! Ordered keys in the bundled run: `--keyed` gives each order one to three events (created,
//! paid, shipped) with the order id as their key, which retries reorder (`out_of_order` > 0);
//! `--ordered` keeps each order's events in order (`out_of_order` 0), through a `kill -9` and a
//! restart too; under `on_dead_letter: block` a dead-lettered event holds its order's later
//! events back until an operator skips its letter, and they then flow in order.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rebound::pipeline::PipelineDb;
use rebound::pipeline::orders::{event_at, event_id, position_of};
use rebound_runtime::store::{MessageId, Store};

const MESSAGES: u64 = 20_000;

fn keyed_run(data: &Path, flag: &str) -> serde_json::Value {
    let mut cmd = run_cmd(data, &shipped_rules(), MESSAGES, 1000.0);
    cmd.arg(flag);
    let out = Running::spawn(cmd).wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report(&out)
}

#[test]
fn ordered_events_reach_the_store_in_order_and_keyed_alone_they_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let ordered = keyed_run(&dir.path().join("ordered"), "--ordered");
    assert_eq!(ordered["lost"], 0, "{ordered:#}");
    assert_eq!(ordered["out_of_order"], 0, "{ordered:#}");
    assert_eq!(ordered["emitted"], MESSAGES, "{ordered:#}");
    assert_eq!(ordered["keyed"], true, "{ordered:#}");
    assert!(ordered["retries"].as_u64().unwrap() > 0, "{ordered:#}");

    let keyed = keyed_run(&dir.path().join("keyed"), "--keyed");
    assert_eq!(keyed["lost"], 0, "{keyed:#}");
    assert_eq!(keyed["emitted"], MESSAGES, "{keyed:#}");
    assert!(
        keyed["out_of_order"].as_u64().unwrap() > 0,
        "retries reorder events when ordering is off: {keyed:#}"
    );
}

#[test]
fn killed_during_an_ordered_run_then_restarted_no_event_overtakes_another() {
    let mut rng = SmallRng::seed_from_u64(0x0dd3_4ed5);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cmd = || {
        let mut cmd = run_cmd(&data, &shipped_rules(), MESSAGES, 1000.0);
        cmd.arg("--ordered");
        cmd
    };
    let mut landed = false;
    let mut points: Vec<u64> = (0..2).map(|_| rng.random_range(500..16_000)).collect();
    points.sort_unstable();
    for point in points {
        let mut child = Running::spawn(cmd());
        assert!(
            wait_until(Duration::from_secs(60), || child.exited()
                || orders_written(&data) >= point),
            "no progress towards {point} events"
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(0..40)));
        landed |= child.kill9().status.code().is_none();
    }
    assert!(landed, "no kill landed mid-run");

    let out = Running::spawn(cmd()).wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert_eq!(report["out_of_order"], 0, "{report:#}");
    assert_eq!(report["complete"], true, "{report:#}");
    assert_eq!(report["emitted"], MESSAGES, "{report:#}");
    assert!(report["sessions"].as_u64().unwrap() >= 2, "{report:#}");
    assert!(
        report["duplicates"].as_u64().unwrap() > 0,
        "a kill redelivers: {report:#}"
    );
}

/// The run's open dead letters, by event number.
fn open_letters(http: &reqwest::blocking::Client, base: &str) -> Vec<(u64, String)> {
    let all: serde_json::Value = http
        .get(format!("{base}/v1/dead-letters?status=dead&limit=1000"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    all["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let id = d["id"].as_str().unwrap().to_owned();
            (position_of(&id).expect("an event id"), id)
        })
        .collect()
}

#[test]
fn under_block_a_dead_lettered_event_holds_its_order_back_until_an_operator_skips_it() {
    const EVENTS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("block.yaml");
    std::fs::write(&config, "topology:\n  on_dead_letter: block\n").unwrap();
    let mut cmd = run_cmd(&data, &shipped_rules(), EVENTS, 1000.0);
    cmd.arg("--ordered")
        .arg("--config")
        .arg(&config)
        .args(["--admin", "127.0.0.1:0"]);
    let mut child = Running::spawn(cmd);
    let base = admin_base(&mut child);
    rebound::outbound::use_ring_by_default();
    let http = reqwest::blocking::Client::new();
    let metric = |name: &str| {
        let text = http
            .get(format!("{base}/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap();
        sample(&text, name).unwrap_or_default()
    };
    // Everything the blocked orders let through is done: nothing in flight or waiting for a
    // retry (twice, a moment apart), and events are held.
    let quiet = || {
        metric("rebound_pending") == 0.0
            && metric("rebound_retry_queue_depth") == 0.0
            && metric("rebound_ordered_held") > 0.0
    };
    let settled = || {
        quiet() && {
            std::thread::sleep(Duration::from_millis(300));
            quiet()
        }
    };
    assert!(
        wait_until(Duration::from_secs(90), settled),
        "the run never settled with events held behind their orders"
    );

    // Each order's events in the run, by place.
    let seed = rebound::pipeline::Faults::default().seed;
    let mut orders: BTreeMap<u64, Vec<(u8, u64)>> = BTreeMap::new();
    for n in 1..=EVENTS {
        let (order, place) = event_at(seed, n);
        orders.entry(order).or_default().push((place, n));
    }
    let behind = |n: u64| -> Vec<u64> {
        let (order, place) = event_at(seed, n);
        orders[&order]
            .iter()
            .filter(|&&(p, _)| p > place)
            .map(|&(_, e)| e)
            .collect()
    };
    let letters = open_letters(&http, &base);
    let held: Vec<u64> = letters.iter().flat_map(|&(n, _)| behind(n)).collect();
    assert!(!held.is_empty(), "no dead letter holds an order back");
    assert_eq!(
        metric("rebound_ordered_held") as usize,
        held.len(),
        "{letters:?}"
    );
    assert!(metric("rebound_ordered_keys_blocked") >= 1.0);
    let db = PipelineDb::open_read_only(&data).unwrap();
    for &n in &held {
        assert!(
            !db.has_order(&event_id(n)).unwrap(),
            "event {n} reached the store while its order was blocked"
        );
    }

    // The operator skips the open letters (again, should a released event be dead-lettered
    // in turn): the held events flow, in order, and the run ends.
    let mut skipped = std::collections::BTreeSet::new();
    while !child.exited() {
        for (_, id) in open_letters(&http, &base) {
            if skipped.insert(id.clone()) {
                let answer = http
                    .post(format!("{base}/v1/dead-letters/{id}/skip"))
                    .body(r#"{"operator":"ops","reason":"handled by hand"}"#)
                    .send()
                    .unwrap();
                assert_eq!(answer.status(), 200, "{:?}", answer.text());
            }
        }
        wait_until(Duration::from_secs(2), || child.exited());
    }
    let out = child.wait();
    assert_eq!(out.status.code(), Some(0));
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert_eq!(report["out_of_order"], 0, "{report:#}");
    assert_eq!(report["complete"], true, "{report:#}");
    // Every held event reached the store after the skip, or was dead-lettered itself.
    let store = open_store(&data);
    for &n in &held {
        let id = event_id(n);
        let letter = store.dead_letter(&MessageId::from(id.as_str())).unwrap();
        assert!(
            db.has_order(&id).unwrap() || letter.is_some(),
            "event {n} never got through after the skip"
        );
    }
}
