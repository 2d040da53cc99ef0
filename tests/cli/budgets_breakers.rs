//! `budgets:` and `breakers:` through the real binary: `decide` and `explain` name the budget
//! and the breakers a failure falls under (`--json`: keys `budget` and `breakers` after the
//! decision's own), a set without them prints exactly as before, and `check` locates a bad
//! value.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

/// The shipped rules plus the spec's budget and breaker.
fn rules() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    for entry in std::fs::read_dir(shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(
        dir.path().join("60-adaptive.yaml"),
        "version: 1
budgets:
  - id: payment-retries
    match: { biz: PAYMENT }
    ratio: 20%
    min_per_s: 5
breakers:
  - id: payment-gateway
    match: { biz: PAYMENT, code: [NET_TIMEOUT, PAY_PROCESSING] }
    per: attrs.downstream
    open_at: 50%
    cool_down: 30s
",
    )
    .unwrap();
    dir
}

#[test]
fn decide_names_the_budget_and_the_breakers_of_a_failure() {
    let dir = rules();
    let out = rebound()
        .args([
            "decide",
            "--biz",
            "PAYMENT",
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "1",
        ])
        .args([
            "--attr",
            "downstream=pg-1",
            "--seed",
            "7",
            "--json",
            "--rules",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("{\"action\":\"retry\",\"delay_ms\":"),
        "{text}"
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["budget"], "payment-retries", "{doc}");
    assert_eq!(
        doc["breakers"],
        serde_json::json!([{"id": "payment-gateway", "per": "attrs.downstream", "key": "pg-1"}])
    );
    // Out of every scope: no budget, no breaker.
    let out = rebound()
        .args([
            "decide",
            "--biz",
            "ORDER",
            "--code",
            "BAD_JSON",
            "--attempt",
            "1",
            "--json",
            "--rules",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["budget"].clone(), doc["breakers"].clone()),
        (serde_json::Value::Null, serde_json::json!([]))
    );
    rebound()
        .args([
            "explain",
            "--biz",
            "PAYMENT",
            "--code",
            "PAY_PROCESSING",
            "--attempt",
            "1",
            "--seed",
            "1",
            "--rules",
        ])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "falls under: budget payment-retries; breaker payment-gateway (attrs.downstream = (none))",
        ));
}

#[test]
fn a_set_without_them_prints_as_before() {
    rebound()
        .args(["decide", "--biz", "PAYMENT", "--code", "PAY_PROCESSING", "--attempt", "1", "--json"])
        .args(["--rules", "engine/tests/fixtures/reload/fast"])
        .assert()
        .success()
        .stdout(predicate::str::is_match(r#"^\{"action":"retry","delay_ms":100,"rule":"payment-processing","attempt":1,"version":"[0-9a-f]{16}"\}\n$"#).unwrap());
}

#[test]
fn check_locates_a_bad_share() {
    let dir = rules();
    let file = dir.path().join("60-adaptive.yaml");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("ratio: 20%", "ratio: 200%");
    std::fs::write(&file, text).unwrap();
    rebound()
        .args(["check", "--rules"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "{}:5:12: error: bad ratio '200%'",
            file.display()
        )));
}

#[test]
fn decide_and_explain_say_at_which_heat_a_breaker_opens_and_whether_this_failure_reaches_it() {
    let dir = rules();
    std::fs::write(
        dir.path().join("61-heat.yaml"),
        "version: 1
breakers:
  - id: hot-network
    match: { code: NET_TIMEOUT }
    per: attrs.downstream
    open_on_heat: 5
    cool_down: 30s
",
    )
    .unwrap();
    let decide = |heat: &str, json: bool| {
        let mut cmd = rebound();
        cmd.args([
            "decide",
            "--biz",
            "PAYMENT",
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "1",
        ])
        .args(["--attr", "downstream=pg-1", "--signal", heat, "--seed", "7"])
        .arg("--rules")
        .arg(dir.path());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let doc: serde_json::Value = serde_json::from_str(&decide("heat=6", true)).unwrap();
    assert_eq!(
        doc["breakers"][1],
        serde_json::json!({"id": "hot-network", "per": "attrs.downstream", "key": "pg-1", "open_on_heat": 5.0, "heat_opens": true}),
        "{doc}"
    );
    let doc: serde_json::Value = serde_json::from_str(&decide("heat=2", true)).unwrap();
    assert_eq!(doc["breakers"][1]["heat_opens"], false, "{doc}");
    let text = decide("heat=6", false);
    assert!(
        text.contains("hot-network (attrs.downstream = pg-1, opens at heat ≥ 5: heat 6 opens it)"),
        "{text}"
    );

    let out = rebound()
        .args([
            "explain",
            "--biz",
            "PAYMENT",
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "1",
        ])
        .args(["--signal", "heat=80"])
        .args(["--attr", "downstream=pg-1", "--rules"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    // The shipped rule for a hot biz decides, and the breaker says it opens at this heat.
    assert!(text.contains("net-timeout-hot"), "{text}");
    assert!(
        text.contains("opens at heat ≥ 5: heat 80 opens it"),
        "{text}"
    );
}
