//! `rebound paths --json` on the shipped rules matches retry paths computed by hand from
//! rules/*.yaml and the backoff table of docs/spec/rules.md.

use assert_cmd::Command;
use serde_json::{Value, json};
use std::path::PathBuf;

fn paths_json() -> Value {
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["paths", "--json", "--rules"])
        .arg(rules)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn path<'a>(doc: &'a Value, rule: &str) -> &'a Value {
    doc["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["rule"] == rule)
        .unwrap_or_else(|| panic!("no path for {rule}"))
}

/// (min, max, total best, total worst) per retry, in ms.
fn rows(p: &Value) -> Vec<[u64; 4]> {
    p["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            [
                "delay_min_ms",
                "delay_max_ms",
                "total_best_ms",
                "total_worst_ms",
            ]
            .map(|k| r[k].as_u64().unwrap())
        })
        .collect()
}

fn end(p: &Value) -> (&str, &str, u64) {
    let e = &p["end"];
    assert_eq!(e["worst_case"]["reason"], e["reason"], "{p}");
    assert_eq!(e["worst_case"]["retries"], e["retries"], "{p}");
    (
        e["dead_letter"].as_str().unwrap(),
        e["reason"].as_str().unwrap(),
        e["retries"].as_u64().unwrap(),
    )
}

#[test]
fn deterministic_rules_match_the_hand_computed_paths() {
    let doc = paths_json();
    // payment-processing: fixed 100ms × 3 → L1.
    let p = path(&doc, "payment-processing");
    assert_eq!(
        rows(p),
        [
            [100, 100, 100, 100],
            [100, 100, 200, 200],
            [100, 100, 300, 300]
        ]
    );
    assert_eq!(end(p), ("L1", "max_retries", 3));
    // stock-insufficient: schedule 30s, 2m, 10m → L1.
    let p = path(&doc, "stock-insufficient");
    assert_eq!(
        rows(p),
        [
            [30_000, 30_000, 30_000, 30_000],
            [120_000, 120_000, 150_000, 150_000],
            [600_000, 600_000, 750_000, 750_000]
        ]
    );
    assert_eq!(end(p), ("L1", "max_retries", 3));
    // message-timeout: linear 2s, step 2s, max 10s × 3 → 2s, 4s, 6s → L2.
    let p = path(&doc, "message-timeout");
    assert_eq!(
        rows(p),
        [
            [2_000, 2_000, 2_000, 2_000],
            [4_000, 4_000, 6_000, 6_000],
            [6_000, 6_000, 12_000, 12_000]
        ]
    );
    assert_eq!(end(p), ("L2", "max_retries", 3));
    // panic: fixed 5s × 1 → L3.
    let p = path(&doc, "panic");
    assert_eq!(rows(p), [[5_000, 5_000, 5_000, 5_000]]);
    assert_eq!(end(p), ("L3", "max_retries", 1));
    // bad-payload: give_up → L3 at once.
    let p = path(&doc, "bad-payload");
    assert_eq!(p["give_up"], true);
    assert_eq!(p["retries"], json!([]));
    assert_eq!(end(p), ("L3", "give_up", 0));
}

#[test]
fn jittered_rules_show_their_ranges() {
    let doc = paths_json();
    // db-lock: exponential 1s ×2 max 30s, equal jitter ([d/2, d]), × 5, max_elapsed 2m → L2.
    let p = path(&doc, "db-lock");
    assert_eq!(
        rows(p),
        [
            [500, 1_000, 500, 1_000],
            [1_000, 2_000, 1_500, 3_000],
            [2_000, 4_000, 3_500, 7_000],
            [4_000, 8_000, 7_500, 15_000],
            [8_000, 16_000, 15_500, 31_000]
        ]
    );
    assert_eq!(p["max_elapsed_ms"], 120_000);
    assert_eq!(end(p), ("L2", "max_retries", 5));
    // The defaults: exponential 1s ×2 max 1m, full jitter ([0, d]) × 3 → L2.
    let p = path(&doc, "defaults");
    assert_eq!(
        rows(p),
        [
            [0, 1_000, 0, 1_000],
            [0, 2_000, 0, 3_000],
            [0, 4_000, 0, 7_000]
        ]
    );
    assert_eq!(end(p), ("L2", "max_retries", 3));
    assert!(p["at"].as_str().unwrap().ends_with("00-defaults.yaml:16:1"));
}

#[test]
fn every_rule_and_the_defaults_have_a_path_in_set_order() {
    let doc = paths_json();
    let rules: Vec<&str> = doc["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "bad-payload",
            "panic",
            "payment-failed",
            "payment-processing",
            "rate-limited",
            "stock-reservation",
            "stock-insufficient",
            "db-lock",
            "net-timeout-hot",
            "net-timeout",
            "message-timeout",
            "defaults"
        ]
    );
    assert!(
        doc["sample_context"]
            .as_str()
            .unwrap()
            .contains("sample context")
    );
}

#[test]
fn csv_has_one_row_per_retry_with_the_rule_id() {
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["paths", "--csv", "--rules"])
        .arg(rules)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let csv = String::from_utf8(out.stdout).unwrap();
    let mut lines = csv.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("rule,retry,delay,delay_min_ms,delay_max_ms,total_best_ms,total_worst_ms")
    );
    let payment: Vec<&str> = csv
        .lines()
        .filter(|l| l.starts_with("payment-processing,"))
        .collect();
    assert_eq!(
        payment,
        [
            "payment-processing,1,100ms,100,100,100,100,true,L1,max_retries,3,max_retries,3",
            "payment-processing,2,100ms,100,100,200,200,true,L1,max_retries,3,max_retries,3",
            "payment-processing,3,100ms,100,100,300,300,true,L1,max_retries,3,max_retries,3"
        ]
    );
    assert!(
        csv.contains("\nbad-payload,,,,,0,0,,L3,give_up,0,give_up,0\n"),
        "{csv}"
    );
    // 2 give_up rows + 1 + 3 + 6 + 5 + 3 + 5 + 5 + 5 + 3 retries + 3 for the defaults, plus
    // the header.
    assert_eq!(
        csv.lines().count(),
        1 + 2 + 1 + 3 + 6 + 5 + 3 + 5 + 5 + 5 + 3 + 3
    );
}
