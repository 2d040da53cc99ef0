//! `decide` and `explain` with `--header K=V` and `--now RFC3339`, and rule tests with
//! `headers` and `now` in `given`, over `tests/fixtures/headers-now`: a rule on a header glob
//! and a rule guarded by `hour_of_day(now, 1) < 9`.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

const RULES: &str = "tests/fixtures/headers-now";

fn decide(extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args([
            "decide",
            "--rules",
            RULES,
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "1",
            "--json",
        ])
        .args(extra)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn decide_follows_a_header_glob() {
    let noon = ["--now", "2026-01-05T12:00:00Z"];
    let vip = decide(
        &[
            &noon[..],
            &["--header", "tenant=vip-eu", "--header", "region=eu"],
        ]
        .concat(),
    );
    assert_eq!(
        (vip["rule"].as_str(), vip["delay_ms"].as_u64()),
        (Some("vip-tenants"), Some(100))
    );
    let other = decide(&[&noon[..], &["--header", "tenant=acme"]].concat());
    assert_eq!(other["rule"], "defaults");
    // A header is not an attribute: `--attr tenant=vip-eu` does not match `headers:`.
    let attr = decide(&[&noon[..], &["--attr", "tenant=vip-eu"]].concat());
    assert_eq!(attr["rule"], "defaults");
}

#[test]
fn decide_follows_an_hour_of_day_guard_at_its_offset() {
    // 07:59 UTC is 08:59 at UTC+1: before nine.
    let early = decide(&["--now", "2026-01-05T07:59:59Z"]);
    assert_eq!(
        (early["rule"].as_str(), early["delay_ms"].as_u64()),
        (Some("before-business-hours"), Some(1_800_000))
    );
    for nine in [
        "2026-01-05T08:00:00Z",
        "2026-01-05T09:00:00+01:00",
        "2026-01-05T03:00:00-05:00",
    ] {
        assert_eq!(decide(&["--now", nine])["rule"], "defaults", "{nine}");
    }
    // Without --now the failure happens now: whichever rule that is, it decides.
    let rule = decide(&[])["rule"].as_str().unwrap().to_string();
    assert!(
        ["before-business-hours", "defaults"].contains(&rule.as_str()),
        "{rule}"
    );
}

#[test]
fn explain_names_the_header_that_did_not_match() {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["explain", "--rules", RULES, "--code", "X", "--attempt", "1"])
        .args(["--header", "tenant=acme", "--now", "2026-01-05T12:00:00Z"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "headers.tenant 'acme' does not match vip-*",
        ))
        .stdout(predicate::str::contains(
            "guard false: if: hour_of_day(now, 1) < 9",
        ));
}

#[test]
fn a_bad_now_or_header_is_a_usage_error_naming_the_flag() {
    for (flag, value) in [
        ("--now", "tomorrow"),
        ("--now", "2026-01-05T08:00:00"),
        ("--now", "2026-02-30T08:00:00Z"),
        ("--header", "tenant"),
        ("--header", "=vip"),
    ] {
        for command in ["decide", "explain"] {
            Command::new(env!("CARGO_BIN_EXE_rebound"))
                .args([
                    command,
                    "--rules",
                    RULES,
                    "--code",
                    "X",
                    "--attempt",
                    "1",
                    flag,
                    value,
                ])
                .assert()
                .code(2)
                .stderr(predicate::str::contains(flag));
        }
    }
}

#[test]
fn rule_tests_take_headers_and_now_and_paths_advance_now() {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["test", "--rules", RULES])
        .assert()
        .success()
        .stdout(predicate::str::contains("6 passed, 0 failed"));
}
