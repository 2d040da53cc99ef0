//! The seed search really searches: a path whose jitter breaks `total_delay_at_most` under some
//! seeds but not others is caught, and the seed it reports does break it.

use assert_cmd::Command;
use rebound_engine::FailureContext;
use rebound_engine::testing::simulate_path;
use std::path::PathBuf;
use std::time::Duration;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolkit/jitter-limit")
}

const LIMIT: Duration = Duration::from_secs(5);

#[test]
fn the_limit_breaks_under_some_seeds_only() {
    let set = rebound_engine::load_dir(&fixture()).unwrap().unwrap();
    let ctx = FailureContext::new("", "FLAKY", 1);
    let totals: Vec<Duration> = (0..200)
        .map(|seed| simulate_path(&set, ctx, Duration::ZERO, seed).total_delay())
        .collect();
    assert!(
        totals.iter().any(|t| *t > LIMIT),
        "no seed breaks the limit"
    );
    assert!(
        totals.iter().any(|t| *t <= LIMIT),
        "every seed breaks the limit"
    );
}

#[test]
fn rebound_test_finds_a_breaking_seed_and_reports_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["test", "--json", "--rules"])
        .arg(fixture())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["passed"].as_u64(), doc["failed"].as_u64()),
        (Some(0), Some(1))
    );
    let failure = &doc["results"][0]["failure"];
    let seed = failure["seed"].as_u64().unwrap();
    let problem = failure["problems"][0].as_str().unwrap();
    assert!(
        problem.contains("is more than total_delay_at_most 5s"),
        "{problem}"
    );
    // The reported seed reproduces the failure through the public API, step for step.
    let set = rebound_engine::load_dir(&fixture()).unwrap().unwrap();
    let path = simulate_path(
        &set,
        FailureContext::new("", "FLAKY", 1),
        Duration::ZERO,
        seed,
    );
    assert!(path.total_delay() > LIMIT);
    let delays: Vec<u64> = path.delays().map(|d| d.as_millis() as u64).collect();
    let reported: Vec<u64> = failure["path"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["delay_ms"].as_u64())
        .collect();
    assert_eq!(delays, reported);
}

#[test]
fn the_text_report_shows_the_seed_and_the_whole_path() {
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["test", "--rules"])
        .arg(fixture())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("FAIL path 'flaky failures wait at most 5s in total' ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("tests/limit.yaml:4:5) with seed "),
        "{stdout}"
    );
    for attempt in 1..=4 {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{attempt} "))),
            "attempt {attempt} missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("dead_letter L1 (max_retries)"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
}
