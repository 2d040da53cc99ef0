//! `rebound run --outage DUR`: the payment gateway goes down for 100 s of rules' time; its
//! breaker opens, holds the payment retries, goes half-open after the cool-down and closes
//! after the ramp, in that order in the report and on `/metrics`; the budget is reported;
//! nothing is lost.

use super::support::{Running, report, run_cmd, wait_until};
use std::path::Path;
use std::time::Duration;

/// The state `rebound_breaker_state` says the gateway's breaker is in, if it says one.
fn gateway_state(metrics: &str) -> Option<String> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(
            "rebound_breaker_state{breaker=\"payment-gateway\",key=\"payment-gateway\",state=\"",
        )?;
        let (state, value) = rest.split_once("\"} ")?;
        (value.trim() == "1").then(|| state.to_owned())
    })
}

/// Payments polled fast (the engine's `fast` fixture; the rest is the defaults'), a budget
/// on payment retries, and the gateway's breaker with thresholds a short test run reaches.
fn rules(dir: &Path) -> std::path::PathBuf {
    let rules = dir.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    let fast = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/tests/fixtures/reload/fast");
    for entry in std::fs::read_dir(fast).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, rules.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::write(
        rules.join("60-adaptive.yaml"),
        "version: 1
budgets:
  - { id: payment-retries, match: { biz: PAYMENT }, ratio: 50%, min_per_s: 50 }
breakers:
  - id: payment-gateway
    match: { biz: PAYMENT, code: [NET_TIMEOUT, PAY_PROCESSING] }
    per: attrs.downstream
    open_at: 80%
    min_samples: 20
    cool_down: 30s
    ramp: 1m
",
    )
    .unwrap();
    rules
}

#[test]
fn an_outage_opens_the_gateways_breaker_which_ramps_and_closes_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let rules = rules(dir.path());
    // 100 s of outage is 1 s of real time at x100: longer than a breaker's shortest window,
    // so its failed share reaches the whole outage's, however loaded the machine.
    let mut cmd = run_cmd(&dir.path().join("data"), &rules, 20_000, 100.0);
    cmd.args(["--outage", "100s", "--admin", "127.0.0.1:0"]);
    let mut child = Running::spawn(cmd);
    let base = super::support::admin_base(&mut child);
    // Every state the metrics show, in the order they show them, until the run ends.
    let mut seen: Vec<String> = Vec::new();
    rebound::outbound::use_ring_by_default();
    let ended = wait_until(Duration::from_secs(120), || {
        let Ok(text) = reqwest::blocking::get(format!("{base}/metrics")).and_then(|r| r.text())
        else {
            return true; // the run ended and its admin API with it
        };
        if let Some(state) = gateway_state(&text)
            && seen.last() != Some(&state)
        {
            seen.push(state);
        }
        false
    });
    assert!(ended, "the run did not end");
    let out = child.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(&out);
    assert_eq!(r["lost"], 0, "{r}");
    assert_eq!(r["emitted"], 20_000, "{r}");
    // The report: the states in order, closed at the end.
    let gateway = &r["breakers"]["payment-gateway"]["payment-gateway"];
    let states: Vec<&str> = gateway["states"]
        .as_array()
        .unwrap_or_else(|| panic!("no breaker in the report: {r}"))
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(states[..2], ["open", "half_open"], "{gateway}");
    assert_eq!(states.last(), Some(&"closed"), "{gateway}");
    for pair in states.windows(2) {
        assert!(
            matches!(
                (pair[0], pair[1]),
                ("open", "half_open") | ("half_open", "open" | "closed") | ("closed", "open")
            ),
            "{states:?}"
        );
    }
    assert_eq!(gateway["state"], "closed");
    // The budget is reported. How many retries it held is not asserted: it holds only what
    // exceeds its ratio within a second, and how many of the outage's payment retries reach it
    // depends on whether the breaker (or the fuse) held them first, which is the machine's
    // timing (0 to about 1,200 in runs on one machine). Its holding is tested in the runtime
    // (`adaptive/budget.rs`, `tests/topology/topology_gate.rs`), where the clock is the test's.
    let budget = &r["budgets"]["payment-retries"];
    assert!(
        budget["held"].is_u64() && budget["exhausted"].is_u64(),
        "{r}"
    );
    // The metrics saw it open, then half-open, then closed again.
    let open = seen
        .iter()
        .position(|s| s == "open")
        .unwrap_or_else(|| panic!("{seen:?}"));
    let half = seen[open..]
        .iter()
        .position(|s| s == "half_open")
        .map(|i| i + open);
    let half = half.unwrap_or_else(|| panic!("{seen:?}"));
    assert!(seen[half..].iter().any(|s| s == "closed"), "{seen:?}");
}

/// The breakers of a report that entered any state: `(breaker, key)`.
fn opened(r: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (id, keys) in r["breakers"].as_object().into_iter().flatten() {
        for (key, b) in keys.as_object().into_iter().flatten() {
            if b["states"].as_array().is_some_and(|s| !s.is_empty()) {
                out.push((id.clone(), key.clone()));
            }
        }
    }
    out
}

#[test]
fn the_default_run_opens_neither_the_fuse_nor_a_breaker_and_an_outage_opens_the_gateways() {
    // The defaults as shipped: 50,000 orders at x100, the shipped rules and configuration.
    let dir = tempfile::tempdir().unwrap();
    let rules = super::support::shipped_rules();
    let out = run_cmd(&dir.path().join("quiet"), &rules, 50_000, 100.0)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let r = report(&out);
    assert_eq!(r["lost"], 0, "{r}");
    assert!(r["breakers"]["payment-gateway"].is_object(), "{r}");
    assert_eq!(
        opened(&r),
        Vec::<(String, String)>::new(),
        "{:#}",
        r["breakers"]
    );

    // The same with the gateway down: its breaker opens, and the report says on what.
    let mut cmd = run_cmd(&dir.path().join("outage"), &rules, 50_000, 100.0);
    cmd.args(["--outage", "300s"]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let r = report(&out);
    assert_eq!(r["lost"], 0, "{r}");
    let gateway = &r["breakers"]["payment-gateway"]["payment-gateway"];
    assert!(
        opened(&r).contains(&("payment-gateway".into(), "payment-gateway".into())),
        "{:#}",
        r["breakers"]
    );
    let first = &gateway["openings"][0];
    assert!(first["failed_share"].as_f64() >= Some(0.9), "{gateway}");
    assert!(first["samples"].as_u64() >= Some(200), "{gateway}");
    assert_eq!(first["open_at"], 0.9, "{gateway}");
}
