//! The shipped defaults, judged alone: `rebound run` on the embedded rules and
//! configuration opens neither the retry fuse nor a breaker, and `--outage` opens the payment
//! gateway's breaker.
//!
//! This is its own test binary so that nothing else runs beside it: cargo runs test binaries
//! one after another, while the tests of one binary share the machine's two cores. The fuse
//! judges the failed share of the trees finished in its window (1 s of real time at x100), and
//! a run starved of CPU by another full-speed run falls behind its due retries: the retry mix
//! then serves three retries for each new order, and the share of the still-processing
//! payments among them is near the fuse's 50%. That is the fuse doing its job on a machine
//! that cannot keep up, not what the defaults do; so it is tested where the run has the
//! machine to itself, and a failure prints each opening's share and samples.

#[path = "../run/support.rs"]
mod support;

use support::{report, run_cmd};

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
    let rules = support::shipped_rules();
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
