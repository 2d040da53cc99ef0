//! `rebound run` killed with SIGKILL at three random points, restarted each time with the same
//! `--data`, then run to the end: nothing is lost, every order has exactly one fate, and the
//! report (read from the durable state) covers all 20,000 orders. Started once more, it prints
//! the same report.
//!
//! The kill points are seeded (`REBOUND_KILL_SEED` overrides the seed): each is a number of
//! orders written, picked at random, plus a random extra delay so the kill lands anywhere in
//! the write cycle. No assertion is on speed.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rebound::pipeline::PipelineDb;
use rebound_runtime::store::{DeadLetterFilter, DeadLetterStatus, Fate, Store};

const MESSAGES: u64 = 20_000;

#[test]
fn killed_three_times_then_restarted_it_finishes_with_nothing_lost() {
    let seed: u64 = std::env::var("REBOUND_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6b11_1009);
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let rules = shipped_rules();
    let cmd = || run_cmd(&data, &rules, MESSAGES, 1000.0);

    // Three kill points, in orders written, increasing; about 98% of the orders are written.
    let mut points: Vec<u64> = (0..3).map(|_| rng.random_range(200..18_000)).collect();
    points.sort_unstable();
    let mut kills = Vec::new();
    for (round, point) in points.iter().enumerate() {
        let mut child = Running::spawn(cmd());
        let reached = wait_until(Duration::from_secs(60), || {
            child.exited() || orders_written(&data) >= *point
        });
        assert!(reached, "round {round}: no progress towards {point} orders");
        std::thread::sleep(Duration::from_millis(rng.random_range(0..40)));
        let written = orders_written(&data);
        let out = child.kill9();
        kills.push((round, *point, written, out.status.code()));
        eprintln!(
            "round {round}: killed at {written} orders written (aimed at {point}), status {:?}",
            out.status
        );
    }
    // At least one kill must have landed mid-run (a child that finished first exits 0).
    assert!(
        kills.iter().any(|k| k.3.is_none()),
        "no kill landed mid-run: {kills:?}"
    );

    let out = Running::spawn(cmd()).wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "final run failed:\n{stderr}");
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert_eq!(report["complete"], true, "{report:#}");
    assert_eq!(report["emitted"], MESSAGES, "{report:#}");
    let acked = report["acked"].as_u64().unwrap();
    let dead = report["dead_lettered"].as_u64().unwrap();
    assert_eq!(acked + dead, MESSAGES, "{report:#}");
    assert!(report["sessions"].as_u64().unwrap() >= 2, "{report:#}");
    for key in [
        "retries",
        "duplicates",
        "dead_letters_by_label",
        "retries_by_rule",
        "throughput_per_s",
        "latency_ms",
    ] {
        assert!(report.get(key).is_some(), "missing {key}: {report:#}");
    }

    // Once more: the run is finished, so the same report comes back and nothing runs.
    let again = Running::spawn(cmd()).wait();
    assert_eq!(again.status.code(), Some(0));
    // The same report, what the budgets and breakers did included (the shipped rules have
    // both, so the report has both).
    assert!(report.get("budgets").is_some(), "{report:#}");
    assert!(report.get("breakers").is_some(), "{report:#}");
    assert_eq!(
        super::support::report(&again),
        report,
        "a finished run must print the same report"
    );

    // The database, read on its own.
    let store = open_store(&data);
    let fates = fates(&store, MESSAGES);
    let missing: Vec<&str> = fates
        .iter()
        .filter(|(_, f)| f.is_none())
        .map(|(id, _)| id.as_str())
        .take(10)
        .collect();
    assert!(missing.is_empty(), "orders without a fate: {missing:?}");
    let db_acked = fates
        .iter()
        .filter(|(_, f)| *f == Some(Fate::Acked))
        .count() as u64;
    let db_dead = fates
        .iter()
        .filter(|(_, f)| *f == Some(Fate::DeadLettered))
        .count() as u64;
    assert_eq!((db_acked, db_dead), (acked, dead));
    assert!(store.scheduled().unwrap().is_empty(), "retries left over");
    assert_eq!(store.position("order-spout").unwrap(), Some(MESSAGES));

    // Every open dead letter belongs to a dead-lettered order (never to an acked one), one each,
    // and the labels add up to the report's.
    let fate_of: BTreeMap<&str, Option<Fate>> =
        fates.iter().map(|(id, f)| (id.as_str(), *f)).collect();
    let mut labels: BTreeMap<String, u64> = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut filter = DeadLetterFilter {
        status: Some(DeadLetterStatus::Dead),
        limit: 1000,
        ..DeadLetterFilter::default()
    };
    loop {
        let page = store.dead_letters(&filter).unwrap();
        for d in &page.items {
            let id = d.letter.message.id.to_string();
            assert_eq!(
                fate_of.get(id.as_str()).copied().flatten(),
                Some(Fate::DeadLettered),
                "{id} has a dead letter but is not dead-lettered"
            );
            assert!(seen.insert(id.clone()), "{id} has two open dead letters");
            *labels.entry(d.letter.label.to_string()).or_default() += 1;
        }
        match page.next {
            Some(next) => filter.before = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len() as u64, dead);
    let reported: BTreeMap<String, u64> =
        serde_json::from_value(report["dead_letters_by_label"].clone()).unwrap();
    assert_eq!(labels, reported);

    // Every acked order is written, once (the table's key), and duplicates were absorbed.
    let db = PipelineDb::open_read_only(&data).unwrap();
    for (id, fate) in &fates {
        if *fate == Some(Fate::Acked) {
            assert!(db.has_order(id).unwrap(), "{id} acked but not written");
        }
    }
    assert_eq!(
        db.duplicates().unwrap(),
        report["duplicates"].as_u64().unwrap()
    );
}
