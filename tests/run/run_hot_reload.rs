//! A rule file edited while `rebound run` runs changes the decisions that follow.
//!
//! The run watches a copy of the shipped rules. Mid-run, the test saves a new
//! `20-payment.yaml` (write a temp file, rename it over: an editor's save) in which
//! `payment-processing` waits 40 s instead of 100 ms. At time scale 100 that is 400 ms of real
//! time instead of 1 ms, and fixed delays have no jitter, so every stored retry says exactly
//! which set decided it and how long it waits. The test samples the store's retry rows while
//! the run goes on: rows decided by the new set wait 400 ms, rows decided by the old one 1 ms,
//! and rows from the new set do appear.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::*;
use rebound_runtime::store::{MessageId, Store};

const MESSAGES: u64 = 40_000;

fn version(rules: &Path) -> String {
    rebound_engine::load_dir(rules)
        .expect("read the rules")
        .expect("valid rules")
        .version()
        .to_string()
}

fn copy_rules(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(shipped_rules()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn a_delay_edited_mid_run_is_used_by_the_retries_that_follow() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    let data = dir.path().join("data");
    copy_rules(&rules);
    let old = version(&rules);

    let mut child = Running::spawn(run_cmd(&data, &rules, MESSAGES, 100.0));
    assert!(
        wait_until(Duration::from_secs(60), || child.exited()
            || orders_written(&data) >= 1_000),
        "the run made no progress"
    );
    assert!(!child.exited(), "the run ended before the edit");

    let file = rules.join("20-payment.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replace("backoff: { fixed: 100ms }", "backoff: { fixed: 40s }");
    assert_ne!(
        edited, text,
        "the shipped payment rule changed; update this test"
    );
    let tmp = rules.join(".20-payment.yaml.tmp");
    std::fs::write(&tmp, &edited).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    let new = version(&rules);
    assert_ne!(old, new);

    // Sample the retry rows of payment-processing: (version → delays seen).
    let store = open_store(&data);
    let mut seen: BTreeMap<String, BTreeMap<u128, u64>> = BTreeMap::new();
    let saw_new = wait_until(Duration::from_secs(60), || {
        let ids: Vec<MessageId> = store
            .scheduled()
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        for r in store.retries(&ids).unwrap() {
            let Some(last) = r.message.retry.last_failure() else {
                continue;
            };
            if last.rule.as_str() == "payment-processing" {
                *seen
                    .entry(last.version.to_string())
                    .or_default()
                    .entry(last.delay.unwrap_or_default().as_millis())
                    .or_default() += 1;
            }
        }
        seen.contains_key(&new) || child.exited()
    });
    assert!(saw_new, "no retry decided by the edited set: {seen:?}");
    for (v, delays) in &seen {
        let expected = if *v == new {
            400
        } else {
            assert_eq!(*v, old, "a retry from an unknown set: {seen:?}");
            1
        };
        assert_eq!(
            delays.keys().copied().collect::<Vec<_>>(),
            vec![expected],
            "set {v} decided other delays: {seen:?}"
        );
    }

    let out = child.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The accepted reload is logged at the default level, with its version, source and files.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logged = stderr
        .lines()
        .find(|l| l.contains("rule set accepted"))
        .unwrap_or_else(|| panic!("the reload is not logged:\n{stderr}"));
    for part in [
        format!("version={new}"),
        "source=file".into(),
        "files=".into(),
    ] {
        assert!(logged.contains(&part), "{part} missing: {logged}");
    }
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert!(
        report["retries_by_rule"]["payment-processing"]
            .as_u64()
            .unwrap()
            > 0,
        "{report:#}"
    );
}
