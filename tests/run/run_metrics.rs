//! The metrics of `docs/spec/operations.md` after a run: their values agree with the run's
//! report, and the real binary's `/metrics` passes `promtool check metrics`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rebound::metrics::Metrics;
use rebound::pipeline::{self, Faults, PipelineOptions};
use rebound_engine::PolicyHandle;
use rebound_runtime::policy::TimeScale;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_run_the_operations_metrics_agree_with_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let rules = Arc::new(PolicyHandle::new(
        rebound_engine::load_dir(&shipped_rules()).unwrap().unwrap(),
    ));
    let n = 3_000;
    let mut options = PipelineOptions::new(rules, dir.path());
    options.messages = Some(n);
    options.time_scale = TimeScale::new(1000.0).unwrap();
    options.faults = Faults::default();
    let max_pending = options.config.max_spout_pending as f64;
    let running = pipeline::start(options).await.unwrap();
    let metrics = Metrics::new();
    let handle = running.handle();
    metrics.runtime.attach(handle.stats());
    metrics.runtime.attach_duplicates(handle.duplicates());
    tokio::time::timeout(Duration::from_secs(120), running.finished())
        .await
        .expect("the run finishes");
    // A slow write lands twice the message timeout (at least a real second) after its
    // delivery, after its retry's write: it may still be sleeping when the run finishes.
    let duplicates = handle.duplicates();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while duplicates.load(std::sync::atomic::Ordering::Relaxed) == 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = running.stop(Duration::from_secs(10)).await.unwrap();
    // Read after the stop, when nothing more is written: the metrics and the report agree.
    let text = metrics.encode(false);
    assert!(report.complete && report.lost == 0, "{report:?}");
    let value =
        |series: &str| sample(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));

    // A fresh run: every order is delivered for the first time once.
    assert_eq!(value("rebound_messages_new_total"), n as f64);
    // A complete run fired every retry it scheduled, each counted under its deciding rule.
    let fired = samples_by(&text, "rebound_retries_fired_total", "rule");
    let scheduled: std::collections::BTreeMap<String, f64> = report
        .retries_by_rule
        .iter()
        .map(|(rule, n)| (rule.clone(), *n as f64))
        .collect();
    assert!(report.retries > 0, "{report:?}");
    assert_eq!(fired, scheduled, "{text}");
    // Every acked message under the attempt that succeeded; the faults make some need more.
    let by_attempt = samples_by(&text, "rebound_acked_by_attempt_total", "attempt");
    assert_eq!(
        by_attempt.keys().collect::<Vec<_>>(),
        ["1", "2", "3", "4", "5", "6+"]
    );
    assert_eq!(by_attempt.values().sum::<f64>(), report.acked as f64);
    assert!(
        by_attempt["1"] < report.acked as f64 && by_attempt["2"] > 0.0,
        "{by_attempt:?}"
    );
    // The slow writes land after their tree timed out: the retry's write is absorbed.
    assert!(report.duplicates > 0, "{report:?}");
    assert_eq!(value("rebound_duplicates_total"), report.duplicates as f64);
    let high_water = value("rebound_pending_high_water");
    assert!(
        high_water >= 1.0 && high_water <= max_pending,
        "{high_water}"
    );
    // The default 30 s timeout at time scale 1000 is the floor of one real second.
    assert_eq!(value("rebound_message_timeout_seconds"), 1.0);
    // Every delivery went through `parse` (two tasks, one histogram); `store` saw those parsed.
    let parse = value("rebound_bolt_latency_seconds_count{component=\"parse\"}");
    let store = value("rebound_bolt_latency_seconds_count{component=\"store\"}");
    assert_eq!(parse, report.deliveries as f64, "{text}");
    assert!(store > 0.0 && store < parse, "{text}");
    assert_eq!(
        value("rebound_bolt_latency_seconds_bucket{le=\"+Inf\",component=\"store\"}"),
        store
    );
}

#[test]
fn the_binary_s_metrics_pass_promtool_check_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut cmd = run_cmd(&data, &shipped_rules(), 40_000, 100.0);
    cmd.args(["--admin", "127.0.0.1:0"]);
    let mut child = Running::spawn(cmd);
    let base = super::support::admin_base(&mut child);
    rebound::outbound::use_ring_by_default();
    let scrape = || {
        reqwest::blocking::get(format!("{base}/metrics"))
            .and_then(|r| r.text())
            .unwrap_or_default()
    };
    // Scraped while the run goes on, once each new family has samples.
    let mut text = String::new();
    assert!(
        wait_until(Duration::from_secs(60), || {
            text = scrape();
            text.contains("rebound_retries_fired_total{rule=")
                && text.contains("rebound_duplicates_total")
                && text.contains("rebound_bolt_latency_seconds_count{component=\"store\"}")
        }),
        "no retries fired yet:\n{text}"
    );
    let said = promtool_ok(&["check", "metrics"], Some(&text));
    // `check metrics` also lints; the exposition has nothing to say.
    assert!(!said.contains("error"), "{said}\n{text}");
    assert!(Path::new(&data).exists());
    drop(child);
}
