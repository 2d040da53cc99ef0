//! What-if after a real `rebound run`: the runtime logs every decision of the shipped rules
//! (`decisions.sample` 100%), so the shipped rules against that log change nothing, and a
//! candidate that changes one rule's delay changes exactly that rule's retries.

use super::support::*;
use super::whatif_log::{SLOWER_PROCESSING, candidate};
use rebound_runtime::store::{DecisionFilter, Store};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

fn whatif(rules: &Path, data: &Path, extra: &[&str]) -> (i32, Value) {
    let out = Command::new(bin())
        .arg("whatif")
        .arg("--rules")
        .arg(rules)
        .arg("--data")
        .arg(data)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let answer = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), answer)
}

#[test]
fn after_a_run_its_own_rules_change_nothing_and_a_changed_delay_exactly_its_rule() {
    let data = tempfile::tempdir().unwrap();
    let out = run_cmd(data.path(), &shipped_rules(), 2000, 100.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let logged = open_store(data.path())
        .decisions(&DecisionFilter::default())
        .unwrap();
    assert!(!logged.is_empty(), "the run logged its decisions");

    let (code, own) = whatif(&shipped_rules(), data.path(), &["--fail-on-change"]);
    assert_eq!(code, 0, "{own}");
    assert_eq!(own["total"], logged.len());
    assert_eq!(own["changed"], 0, "{own}");

    let slower = candidate(Some(SLOWER_PROCESSING));
    let (code, answer) = whatif(slower.path(), data.path(), &[]);
    assert_eq!(code, 0, "{answer}");
    let expected = logged
        .iter()
        .filter(|d| d.outcome.rule == "payment-processing" && d.outcome.action == "retry")
        .count();
    assert!(expected > 0, "the run polled a payment still processing");
    assert_eq!(answer["changed"], expected, "{answer}");
    let verdict = json!({"rule": "payment-processing", "action": "retry", "label": null});
    let by = answer["by"].as_array().unwrap();
    assert_eq!(by.len(), 1, "{answer}");
    assert_eq!((&by[0]["old"], &by[0]["new"]), (&verdict, &verdict));
    assert_eq!(by[0]["count"], expected);
    assert_eq!(by[0]["delay_ms"]["old"], json!({"p50": 100, "p99": 100}));
    assert_eq!(by[0]["delay_ms"]["new"], json!({"p50": 250, "p99": 250}));
}
