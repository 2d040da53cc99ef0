//! What `deploy/` ships for operators: the Prometheus alerting rules pass `promtool check
//! rules` and their unit tests (`promtool test rules`, every alert firing and not), and the
//! Grafana dashboard is valid JSON that charts every metric of `docs/spec/operations.md`.
//! promtool must be installed: these fail, not skip, without it.

use std::path::Path;

use crate::support::*;

const ALERTS: &str = "deploy/prometheus/rebound-alerts.yaml";
const ALERT_TESTS: &str = "deploy/prometheus/rebound-alerts.test.yaml";
const DASHBOARD: &str = "deploy/grafana/rebound.json";

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn the_alerting_rules_pass_promtool_and_their_unit_tests() {
    let said = promtool_ok(&["check", "rules", ALERTS], None);
    assert!(said.contains("SUCCESS"), "{said}");
    let said = promtool_ok(&["test", "rules", ALERT_TESTS], None);
    assert!(said.contains("SUCCESS"), "{said}");
}

#[test]
fn every_alert_has_a_firing_and_a_quiet_case() {
    let rules = read(ALERTS);
    let tests = read(ALERT_TESTS);
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert_eq!(alerts.len(), 9, "{alerts:?}");
    for alert in alerts {
        // A case is `alertname: X` followed by its `exp_alerts`, empty (quiet) or not.
        let cases: Vec<&str> = tests
            .split("alertname: ")
            .skip(1)
            .filter(|case| case.lines().next() == Some(alert))
            .collect();
        let quiet = cases.iter().any(|c| c.contains("exp_alerts: []"));
        let firing = cases.iter().any(|c| c.contains("exp_labels:"));
        assert!(quiet && firing, "{alert}: quiet {quiet}, firing {firing}");
    }
}

#[test]
fn the_dashboard_charts_every_operations_metric() {
    let dashboard: serde_json::Value = serde_json::from_str(&read(DASHBOARD)).expect("valid JSON");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(variables.iter().any(|v| v["type"] == "datasource"));
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect();
    for metric in [
        "rebound_messages_new_total",
        "rebound_retries_fired_total",
        "rebound_acked_by_attempt_total",
        "rebound_duplicates_total",
        "rebound_dead_letters_open",
        "rebound_dead_letters_overdue",
        "rebound_dead_letter_oldest_open_age_seconds",
        "rebound_redrives_total",
        "rebound_alerts_total",
        "rebound_budget_held_total",
        "rebound_budget_exhausted_total",
        "rebound_breaker_state",
        "rebound_pending_high_water",
        "rebound_bolt_latency_seconds_bucket",
        "rebound_complete_latency_seconds_bucket",
        "rebound_dead_letters_total",
    ] {
        assert!(
            exprs.iter().any(|e| e.contains(metric)),
            "no panel shows {metric}"
        );
    }
}

/// The threshold of `alert` in the alerting rules: the number after its expression's `>`.
fn threshold(rules: &str, alert: &str) -> f64 {
    let at = rules
        .find(&format!("- alert: {alert}\n"))
        .unwrap_or_else(|| panic!("{alert} in {ALERTS}"));
    let after = &rules[at..];
    let line = after
        .lines()
        .find_map(|l| l.trim().strip_prefix("> "))
        .unwrap_or_else(|| panic!("{alert} has a `> N` threshold"));
    line.trim().parse().unwrap()
}

#[test]
fn the_demo_fires_the_retry_warning_but_not_the_critical_as_the_readme_says() {
    let rules = read(ALERTS);
    let (warning, critical) = (
        threshold(&rules, "ReboundRetryRatioHigh"),
        threshold(&rules, "ReboundRetryRatioCritical"),
    );
    let dead = threshold(&rules, "ReboundDeadLetterRatioHigh");
    let data = tempfile::tempdir().unwrap();
    let out = run_cmd(data.path(), &shipped_rules(), 3000, 100.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = report(&out);
    let emitted = doc["emitted"].as_f64().unwrap();
    let ratio = doc["retries"].as_f64().unwrap() / emitted;
    let dead_ratio = doc["dead_lettered"].as_f64().unwrap() / emitted;
    assert!(
        warning < ratio && ratio < critical,
        "the demo's retry ratio {ratio:.3} is no longer between {warning} and {critical}: \
         change the README's words on ReboundRetryRatioHigh"
    );
    assert!(dead_ratio < dead, "dead-letter ratio {dead_ratio:.3}");
    let readme = read("README.md");
    assert!(
        readme.contains("On the bundled demo `ReboundRetryRatioHigh` goes pending at once"),
        "the README says why the warning fires on the demo"
    );
}
