//! `rebound run`'s life cycle as a user sees it: a graceful stop on SIGTERM (exit 0, an
//! incomplete report, and a restart that finishes the run), `--json` as the only thing on
//! stdout, a data directory that holds another run or is in use by another process, and bad
//! flags.

/// A data directory that fills up.
mod store_failure;

use std::process::Command;
use std::time::Duration;

use crate::support::*;

#[test]
fn a_second_process_on_a_data_directory_in_use_exits_2_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let rules = shipped_rules();
    let mut first = Running::spawn(run_cmd(&data, &rules, 2_000_000, 100.0));
    assert!(
        wait_until(Duration::from_secs(60), || first.exited()
            || orders_written(&data) >= 100),
        "no progress"
    );
    assert!(!first.exited(), "the first run ended early");
    let expected = format!(
        "error: data directory {} is in use by process {}",
        data.display(),
        first.id()
    );
    let second = Running::spawn(run_cmd(&data, &rules, 2_000_000, 100.0)).wait();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(second.stdout.is_empty(), "nothing on stdout");
    // `serve` shares the rule.
    let serve = Command::new(bin())
        .args(["serve", "--admin", "127.0.0.1:0", "--data"])
        .arg(&data)
        .arg("--rules")
        .arg(&rules)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert_eq!(serve.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&expected), "{stderr}");
    // The first one is untouched by all this.
    assert!(!first.exited());
    first.kill9();
}

#[test]
fn deleting_the_lock_file_does_not_let_a_second_run_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let rules = shipped_rules();
    let mut first = Running::spawn(run_cmd(&data, &rules, 2_000_000, 100.0));
    assert!(
        wait_until(Duration::from_secs(60), || first.exited()
            || orders_written(&data) >= 100),
        "no progress"
    );
    assert!(!first.exited(), "the first run ended early");
    std::fs::remove_file(data.join("rebound.lock")).unwrap();
    let second = Running::spawn(run_cmd(&data, &rules, 2_000_000, 100.0)).wait();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    let expected = format!(
        "error: data directory {} is in use by another process",
        data.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(!first.exited());
    first.kill9();
}

#[test]
fn sigterm_stops_gracefully_and_the_next_run_finishes_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let rules = shipped_rules();
    let messages = 30_000;

    let mut child = Running::spawn(run_cmd(&data, &rules, messages, 100.0));
    assert!(
        wait_until(Duration::from_secs(60), || child.exited()
            || orders_written(&data) >= 2_000),
        "no progress"
    );
    assert!(!child.exited(), "the run ended before the signal");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a graceful stop exits 0:\n{stderr}"
    );
    let first = report(&out);
    assert_eq!(first["complete"], false, "{first:#}");
    assert_eq!(first["lost"], 0, "{first:#}");
    assert!(first["outstanding"].as_u64().unwrap() > 0, "{first:#}");
    assert!(first["acked"].as_u64().unwrap() + first["dead_lettered"].as_u64().unwrap() < messages);

    let out = Running::spawn(run_cmd(&data, &rules, messages, 100.0)).wait();
    assert_eq!(out.status.code(), Some(0));
    let last = report(&out);
    assert_eq!(last["complete"], true, "{last:#}");
    assert_eq!(last["lost"], 0, "{last:#}");
    assert_eq!(
        last["acked"].as_u64().unwrap() + last["dead_lettered"].as_u64().unwrap(),
        messages
    );
    assert_eq!(last["sessions"], 2, "{last:#}");
    assert!(
        last["retries"].as_u64().unwrap() >= first["retries"].as_u64().unwrap(),
        "the report covers both sessions"
    );
}

#[test]
fn text_report_by_default_and_another_runs_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = Command::new(bin())
        .args(["run", "--messages", "300", "--time-scale", "1000"])
        .arg("--data")
        .arg(&data)
        .arg("--rules")
        .arg(shipped_rules())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "300 messages",
        "time scale 1000×",
        "acked",
        "dead-lettered",
        "lost",
        "retries",
        "duplicates",
        "latency",
        "throughput",
        // The shipped rules' budget and breakers.
        "budget",
        "breaker",
    ] {
        assert!(text.contains(word), "no {word:?} in:\n{text}");
    }
    // Run again once finished: the same report, the budget and breaker lines included.
    let again = Command::new(bin())
        .args(["run", "--messages", "300", "--time-scale", "1000"])
        .arg("--data")
        .arg(&data)
        .arg("--rules")
        .arg(shipped_rules())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&again.stdout), text);
    // And in JSON, a run of its own: the same document twice.
    let json_data = dir.path().join("json");
    let first = report(
        &run_cmd(&json_data, &shipped_rules(), 300, 1000.0)
            .output()
            .unwrap(),
    );
    assert!(first.get("budgets").is_some(), "{first:#}");
    assert!(first.get("breakers").is_some(), "{first:#}");
    let second = report(
        &run_cmd(&json_data, &shipped_rules(), 300, 1000.0)
            .output()
            .unwrap(),
    );
    assert_eq!(second, first);

    let other = run_cmd(&data, &shipped_rules(), 500, 1000.0)
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2));
    assert!(other.stdout.is_empty());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        err.contains("holds a finished run of 300 messages"),
        "{err}"
    );
}

#[test]
fn bad_flags_are_usage_errors_and_broken_rules_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for args in [
        &["--time-scale", "0"][..],
        &["--time-scale", "nan"][..],
        &["--messages", "0"][..],
        &["--admin", "not an address"][..],
    ] {
        let out = Command::new(bin())
            .arg("run")
            .args(args)
            .arg("--data")
            .arg(&data)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let broken = dir.path().join("rules");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("a.yaml"),
        "version: 1\nrules:\n  - id: x\n    retry: 5\n",
    )
    .unwrap();
    let out = run_cmd(&data, &broken, 10, 1000.0).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn the_admin_api_next_to_a_run_shows_its_metrics_and_replays_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut cmd = run_cmd(&data, &shipped_rules(), 40_000, 100.0);
    cmd.args(["--admin", "127.0.0.1:0"]);
    let mut child = Running::spawn(cmd);
    let base = super::support::admin_base(&mut child);
    rebound::outbound::use_ring_by_default();
    let http = reqwest::blocking::Client::new();
    let get = |path: &str| http.get(format!("{base}{path}")).send().unwrap();

    // The live counters are on /metrics.
    assert!(wait_until(Duration::from_secs(60), || {
        get("/metrics")
            .text()
            .unwrap()
            .contains("rebound_dead_letters_total{label=\"L3\"}")
    }));
    // The retry paths and their charts, as `serve` answers them.
    let paths: serde_json::Value = get("/v1/paths").json().unwrap();
    let rules: Vec<&str> = paths["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"payment-processing") && rules.last() == Some(&"defaults"));
    let chart = get("/v1/paths/payment-processing.svg");
    assert_eq!(chart.headers()["content-type"], "image/svg+xml");
    assert!(
        chart
            .text()
            .unwrap()
            .contains("<title>payment-processing</title>")
    );
    // A malformed order's dead letter, replayed: it goes back into the running pipeline and,
    // still malformed, is dead-lettered again.
    let letters: serde_json::Value = get("/v1/dead-letters?code=BAD_JSON&limit=1")
        .json()
        .unwrap();
    let id = letters["dead_letters"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let replayed = http
        .post(format!("{base}/v1/dead-letters/{id}/replay"))
        .body(r#"{"operator":"ops","reason":"after the parser fix"}"#)
        .send()
        .unwrap();
    assert_eq!(replayed.status(), 200, "{:?}", replayed.text());
    let rows = || -> Vec<String> {
        let all: serde_json::Value = get("/v1/dead-letters?code=BAD_JSON&limit=1000")
            .json()
            .unwrap();
        all["dead_letters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["id"] == id.as_str())
            .map(|d| d["status"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        wait_until(Duration::from_secs(30), || rows().len() == 2),
        "{:?}",
        rows()
    );
    assert_eq!(rows(), ["dead", "replayed"]);

    let out = child.wait();
    assert_eq!(out.status.code(), Some(0));
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert_eq!(
        report["acked"].as_u64().unwrap() + report["dead_lettered"].as_u64().unwrap(),
        40_000
    );
}
