//! `rebound run`'s logs: `--log-format json` writes one JSON object per stderr line, a retry is
//! an `info` line with its facts as fields, and an injected crash of the store bolt is one
//! line (its message and location), not a panic message and a backtrace per crash.

use crate::support::*;

/// 10,000 orders of the default faults: retries of every kind and a dozen injected crashes.
const MESSAGES: u64 = 10_000;

/// A run to the end with `RUST_LOG=info` (and backtraces asked for, to show none come) and
/// `extra` flags: its report and its stderr lines.
fn logged_run(extra: &[&str]) -> (serde_json::Value, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = run_cmd(&dir.path().join("data"), &shipped_rules(), MESSAGES, 100.0);
    cmd.args(extra)
        .env("RUST_LOG", "info")
        .env("RUST_BACKTRACE", "1");
    let out = Running::spawn(cmd).wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect();
    (report(&out), lines)
}

fn panics_in(report: &serde_json::Value) -> usize {
    report["failures_by_code"]["PANIC"].as_u64().unwrap_or(0) as usize
}

#[test]
fn json_logs_are_one_object_a_line_and_a_retry_says_its_facts() {
    let (report, lines) = logged_run(&["--log-format", "json"]);
    assert!(!lines.is_empty());
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    for event in &events {
        assert!(
            event["level"].is_string() && event["fields"]["message"].is_string(),
            "{event}"
        );
    }
    let retry = events
        .iter()
        .find(|e| e["fields"]["message"] == "retry scheduled")
        .expect("a retry line");
    assert_eq!(retry["level"], "INFO", "{retry}");
    let fields = &retry["fields"];
    assert!(
        fields["id"].as_str().unwrap().starts_with("order-"),
        "{retry}"
    );
    assert!(fields["attempt"].as_u64().unwrap() >= 1, "{retry}");
    assert!(
        fields["rule"].is_string() && fields["code"].is_string(),
        "{retry}"
    );
    assert!(fields["delay_ms"].is_u64(), "{retry}");
    // As many retry lines as retries scheduled.
    let retries = events
        .iter()
        .filter(|e| e["fields"]["message"] == "retry scheduled")
        .count();
    assert_eq!(retries as u64, report["retries"].as_u64().unwrap());
    // The crashes too are one JSON line each, with where they happened.
    let crashes: Vec<_> = events
        .iter()
        .filter(|e| e.to_string().contains("panicked"))
        .collect();
    assert!(
        !crashes.is_empty() && crashes.len() == panics_in(&report),
        "{crashes:?}"
    );
    for crash in crashes {
        assert!(
            crash["fields"]["at"]
                .as_str()
                .unwrap()
                .contains("bolts.rs:"),
            "{crash}"
        );
    }
}

#[test]
fn an_injected_panic_is_one_log_line() {
    let (report, lines) = logged_run(&[]);
    let panicked: Vec<&String> = lines.iter().filter(|l| l.contains("panicked")).collect();
    let crashes = panics_in(&report);
    assert!(
        crashes > 0,
        "the default faults crash the store bolt: {report:#}"
    );
    assert_eq!(
        panicked.len(),
        crashes,
        "one line per crash:\n{panicked:#?}"
    );
    for line in panicked {
        assert!(
            line.contains("injected fault") && line.contains("bolts.rs:"),
            "{line}"
        );
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("stack backtrace") || l.contains("RUST_BACKTRACE")),
        "no backtrace for a caught panic"
    );
}
