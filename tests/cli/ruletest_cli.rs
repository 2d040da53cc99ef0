//! `rebound test` as a user runs it: the real binary on real fixture files.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/toolkit")
        .join(name)
}

fn rebound_test(dir: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .arg("test")
        .arg("--rules")
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn shipped_rule_tests_pass() {
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
    let (code, stdout, stderr) = rebound_test(&rules, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.ends_with(" passed, 0 failed"), "{stdout}");
}

#[test]
fn a_wrong_expectation_fails_with_its_name_seed_and_counts() {
    let (code, stdout, _) = rebound_test(&fixture("wrong-expectation"), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some("3 passed, 1 failed"),
        "{stdout}"
    );
    let fail = stdout
        .lines()
        .find(|l| l.starts_with("FAIL"))
        .expect("a FAIL line");
    assert!(fail.contains("'payment polls wait 200ms'"), "{fail}");
    assert!(fail.contains("tests/checks.yaml:6:5"), "{fail}");
    assert!(fail.contains("with seed "), "{fail}");
    assert!(
        stdout.contains("expected delay 200ms, got 100ms"),
        "{stdout}"
    );
    // The whole path: attempt, elapsed, delay, decision, rule.
    assert!(stdout.contains("payment-processing"), "{stdout}");
    assert_eq!(stdout.matches("FAIL").count(), 1, "{stdout}");
}

#[test]
fn json_output_is_one_document_with_the_counts() {
    let (code, stdout, _) = rebound_test(&fixture("wrong-expectation"), &["--json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(
        (doc["passed"].as_u64(), doc["failed"].as_u64()),
        (Some(3), Some(1))
    );
    let failed: Vec<&serde_json::Value> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["passed"] == false)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["name"], "payment polls wait 200ms");
    assert!(failed[0]["failure"]["seed"].is_u64());
    assert_eq!(failed[0]["failure"]["path"][0]["delay_ms"], 100);
}

#[test]
fn a_pinned_seed_reproduces_a_reported_failure() {
    let (_, stdout, _) = rebound_test(&fixture("jitter-limit"), &["--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let seed = doc["results"][0]["failure"]["seed"]
        .as_u64()
        .expect("a failing seed");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    std::fs::copy(
        fixture("jitter-limit/10-rules.yaml"),
        dir.path().join("10-rules.yaml"),
    )
    .unwrap();
    let pinned = format!(
        "version: 1\ncases:\n  - name: first retry under the failing seed\n    given: {{ code: FLAKY, seed: {seed} }}\n    expect: {{ action: retry }}\npaths:\n  - name: replay\n    given: {{ code: FLAKY, seed: {seed} }}\n    expect: {{ total_delay_at_most: 5s }}\n"
    );
    std::fs::write(dir.path().join("tests/replay.yaml"), pinned).unwrap();
    let (code, stdout, _) = rebound_test(dir.path(), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "'replay' ({}",
            dir.path().join("tests/replay.yaml").display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("with seed {seed}\n")), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("1 passed, 1 failed"));
}

#[test]
fn an_invalid_test_file_is_reported_with_file_line_and_column() {
    let dir = fixture("bad-test-file");
    let (code, stdout, stderr) = rebound_test(&dir, &[]);
    assert_eq!(code, 1, "{stderr}");
    let at = format!(
        "{}:5:5: error: unknown field 'expekt'",
        dir.join("tests/bad.yaml").display()
    );
    assert!(stderr.contains(&at), "{stderr}");
    assert!(stderr.contains("did you mean 'expect'?"), "{stderr}");
    // The broken file counts as one failure; it was the only file, so nothing else ran.
    assert_eq!(
        stdout.lines().last(),
        Some("0 passed, 1 failed"),
        "{stdout}"
    );
}

#[test]
fn a_broken_test_file_is_one_failure_and_the_other_files_still_run() {
    let dir = fixture("partly-broken");
    let (code, stdout, stderr) = rebound_test(&dir, &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let at = format!("{}:8:5", dir.join("tests/20-broken.yaml").display());
    assert!(
        stdout.contains(&format!(
            "FAIL file {at}: unknown field 'expekt', expected one of 'name', 'given', 'expect'; none of its tests ran"
        )),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("{at}: error: unknown field 'expekt'")),
        "{stderr}"
    );
    // Both good files ran: a case and a path.
    assert_eq!(
        stdout.lines().last(),
        Some("2 passed, 1 failed"),
        "{stdout}"
    );

    let (code, stdout, _) = rebound_test(&dir, &["--json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(
        (doc["passed"].as_u64(), doc["failed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["broken_files"][0]["at"], at.as_str());
    assert_eq!(doc["errors"][0]["line"], 8);
    assert_eq!(doc["errors"][0]["column"], 5);
}

#[test]
fn verbose_lists_every_case_and_path_with_its_result() {
    let dir = fixture("wrong-expectation");
    let (code, stdout, _) = rebound_test(&dir, &["-v"]);
    assert_eq!(code, 1, "{stdout}");
    let checks = dir.join("tests/checks.yaml").display().to_string();
    for line in [
        format!(
            "ok   case 'payment polls wait 100ms' ({checks}:3:5) under 256 seed(s); decided payment-processing: retry"
        ),
        format!("FAIL case 'payment polls wait 200ms' ({checks}:6:5) with seed "),
        format!(
            "ok   case 'lock delays stay in range' ({checks}:9:5) under 256 seed(s); decided db-lock: retry"
        ),
        format!(
            "ok   path 'a payment that keeps failing ends in L1' ({checks}:13:5) under 256 seed(s); decided payment-processing: retry, max_retries"
        ),
    ] {
        assert!(stdout.contains(&line), "{line}\nnot in\n{stdout}");
    }
    assert_eq!(stdout.lines().last(), Some("3 passed, 1 failed"));
    // Without -v, passing tests say nothing.
    let (_, quiet, _) = rebound_test(&dir, &[]);
    assert!(!quiet.contains("ok   "), "{quiet}");
}

#[test]
fn filter_runs_only_matching_names_and_says_how_many_were_left_out() {
    let dir = fixture("wrong-expectation");
    let (code, stdout, _) = rebound_test(&dir, &["--filter", "payment"]);
    // The failing case's name contains "payment" too.
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.ends_with("1 filtered out\n2 passed, 1 failed\n"),
        "{stdout}"
    );
    let (code, stdout, _) = rebound_test(&dir, &["--filter", "lock"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.ends_with("3 filtered out\n1 passed, 0 failed\n"),
        "{stdout}"
    );
    let (_, stdout, _) = rebound_test(&dir, &["--filter", "lock", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["filtered_out"], 3);
    assert_eq!(doc["results"][0]["name"], "lock delays stay in range");
}

#[test]
fn a_filter_that_matches_nothing_fails_saying_so() {
    let dir = fixture("wrong-expectation");
    let (code, stdout, stderr) = rebound_test(&dir, &["--filter", "no-such-test"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("no test matches --filter \"no-such-test\""),
        "{stderr}"
    );
    assert!(
        stdout.ends_with("4 filtered out\n0 passed, 0 failed\n"),
        "{stdout}"
    );
    let (code, stdout, _) = rebound_test(&dir, &["--filter", "no-such-test", "--json"]);
    assert_eq!(code, 1, "{stdout}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["filtered_out"], 4);
}

#[test]
fn coverage_shows_per_rule_outcomes_seen_and_never_exercised() {
    let dir = fixture("coverage");
    let (code, stdout, _) = rebound_test(&dir, &["--coverage"]);
    assert_eq!(code, 0, "{stdout}");
    let rules = dir.join("10-rules.yaml").display().to_string();
    for line in [
        "coverage: 3/8 outcomes (37.5%)".to_string(),
        format!("  bad-json      exercised: give_up  ({rules}:8:5)"),
        format!(
            "  db-lock       exercised: retry, max_elapsed; not exercised: max_retries  ({rules}:12:5)"
        ),
        format!("  never-tested  never decided; not exercised: retry, max_retries  ({rules}:19:5)"),
        format!("  defaults      never decided; not exercised: retry, max_retries  ({rules}:4:1)"),
    ] {
        assert!(stdout.contains(&line), "{line}\nnot in\n{stdout}");
    }
    assert_eq!(stdout.lines().last(), Some("3 passed, 0 failed"));

    let (_, stdout, _) = rebound_test(&dir, &["--coverage", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let cov = &doc["coverage"];
    assert_eq!(
        (cov["covered"].as_u64(), cov["total"].as_u64()),
        (Some(3), Some(8))
    );
    assert_eq!(cov["rules"][1]["rule"], "db-lock");
    assert_eq!(
        cov["rules"][1]["seen"],
        serde_json::json!(["retry", "max_elapsed"])
    );
    assert_eq!(
        cov["rules"][1]["not_seen"],
        serde_json::json!(["max_retries"])
    );
    assert_eq!(cov["rules"][3]["rule"], "defaults");
    // Without --coverage the JSON has no coverage key.
    let (_, stdout, _) = rebound_test(&dir, &["--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(doc.get("coverage").is_none(), "{doc}");
}

#[test]
fn an_invalid_rule_set_exits_1_and_a_missing_one_exits_2() {
    let (code, _, stderr) = rebound_test(&fixture("bad-rules"), &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("10-rules.yaml:5:7: error: unknown field 'max_retry'"),
        "{stderr}"
    );
    let (code, _, stderr) = rebound_test(&fixture("no-such-dir"), &[]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn a_runaway_path_is_reported_not_hung() {
    let (code, stdout, _) = rebound_test(&fixture("runaway"), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("the path does not terminate: no dead letter after 10000 attempts"),
        "{stdout}"
    );
    assert!(stdout.contains("more attempts"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
}

#[test]
fn too_few_seeds_is_a_usage_error() {
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
    let (code, _, _) = rebound_test(&rules, &["--seeds", "10"]);
    assert_eq!(code, 2);
}

#[test]
fn a_failing_case_replays_with_rebound_decide_and_its_seed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    std::fs::copy(
        fixture("jitter-limit/10-rules.yaml"),
        dir.path().join("10-rules.yaml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("tests/case.yaml"),
        "version: 1\ncases:\n  - name: an exact delay under full jitter\n    given: { code: FLAKY, attempt: 3 }\n    expect: { delay: 1ms }\n",
    )
    .unwrap();
    let (code, stdout, _) = rebound_test(dir.path(), &["--json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let failure = &doc["results"][0]["failure"];
    let seed = failure["seed"].as_u64().unwrap();
    let reproduce = failure["reproduce"].as_str().unwrap();
    let command = reproduce.split("   (or").next().unwrap();
    assert!(
        command.starts_with("rebound decide --rules ")
            && command.ends_with(&format!(
                " --biz '' --code FLAKY --attempt 3 --now 2026-01-01T00:00:00.000Z --seed {seed}"
            )),
        "{failure}"
    );
    // The command as printed, run from another directory: it decides on the same set.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command} --json"))
        .env(
            "PATH",
            format!(
                "{}:{}",
                Path::new(env!("CARGO_BIN_EXE_rebound"))
                    .parent()
                    .unwrap()
                    .display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let decided: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decided["delay_ms"], failure["path"][0]["delay_ms"]);
}
