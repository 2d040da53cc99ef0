//! The default `rebound run` exercises every shipped rule: the demo's faults carry what the
//! rules read (a held `reservation`, a refused payment's `PAY_FAILED`), so each retry rule
//! schedules retries (the report's `retries_by_rule` names it) and each give-up rule decides
//! dead letters (the store's letters name it).

use super::support::{open_store, report, run_cmd, shipped_rules};
use rebound_runtime::store::{DeadLetterFilter, Store};
use std::collections::BTreeSet;

/// The shipped rules' ids, split into those that give up at once and those that retry.
fn shipped() -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut give_up, mut retry) = (BTreeSet::new(), BTreeSet::new());
    for entry in std::fs::read_dir(shipped_rules()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let doc: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for rule in doc["rules"].as_sequence().into_iter().flatten() {
            let id = rule["id"].as_str().unwrap().to_owned();
            if rule["give_up"].as_bool() == Some(true) {
                give_up.insert(id);
            } else {
                retry.insert(id);
            }
        }
    }
    (give_up, retry)
}

#[test]
fn the_default_run_has_every_shipped_rule_decide() {
    let (give_up, retry) = shipped();
    assert!(
        give_up.len() >= 2 && retry.len() >= 8,
        "{give_up:?} {retry:?}"
    );
    let data = tempfile::tempdir().unwrap();
    let out = run_cmd(data.path(), &shipped_rules(), 50_000, 100.0)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(&out);
    assert_eq!(r["lost"], 0, "{r}");
    let fired: BTreeSet<String> = r["retries_by_rule"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() > Some(0))
        .map(|(rule, _)| rule.clone())
        .collect();
    let missing: Vec<&String> = retry.difference(&fired).collect();
    assert!(
        missing.is_empty(),
        "retry rules that never retried: {missing:?}\n{r}"
    );
    let store = open_store(data.path());
    for rule in &give_up {
        let letters = store
            .dead_letter_count(&DeadLetterFilter {
                rule: Some(rule.clone()),
                ..DeadLetterFilter::default()
            })
            .unwrap();
        assert!(
            letters > 0,
            "give-up rule {rule} decided no dead letter\n{r}"
        );
    }
}
