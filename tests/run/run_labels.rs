//! Labels that act in the real `rebound run`: a label's redrive on a time-scaled run redrives
//! each of its letters exactly `max` times (audited by `rebound`), the run waits for them, and
//! the letters then stay open; the report still gives each message one fate.

use super::support::{open_store, report, run_cmd, shipped_rules};
use rebound_runtime::store::{
    AuditAction, AuditFilter, DeadLetterFilter, DeadLetterStatus, MessageId, Store,
};
use std::collections::BTreeMap;

/// The shipped rules, with L3 (poison: malformed and invalid orders) redriven twice, 1 s after
/// each letter.
fn rules_with_redrive() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(shipped_rules()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(
        dir.path().join("50-labels.yaml"),
        "version: 1\nlabels:\n  L3:\n    redrive: { after: 1s, max: 2 }\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_redriving_label_redrives_each_letter_exactly_max_times_then_leaves_it_open() {
    let data = tempfile::tempdir().unwrap();
    let rules = rules_with_redrive();
    let out = run_cmd(data.path(), rules.path(), 2_000, 100.0)
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
    assert_eq!(r["emitted"], 2_000, "{r}");
    let l3 = r["dead_letters_by_label"]["L3"].as_u64().unwrap();
    assert!(l3 > 0, "the run has poison orders: {r}");
    assert_eq!(
        r["acked"].as_u64().unwrap() + r["dead_lettered"].as_u64().unwrap(),
        2_000,
        "one fate per message: {r}"
    );

    let store = open_store(data.path());
    let open = store
        .dead_letters(&DeadLetterFilter {
            label: Some("L3".into()),
            status: Some(DeadLetterStatus::Dead),
            limit: 1000,
            ..DeadLetterFilter::default()
        })
        .unwrap()
        .items;
    assert_eq!(
        open.len() as u64,
        l3,
        "every L3 message ends with one open letter"
    );
    for letter in &open {
        let id: &MessageId = &letter.letter.message.id;
        assert_eq!(letter.letter.message.retry.redrives, 2, "{id}");
        let audit = store
            .audit_log(&AuditFilter {
                message_id: Some(id.clone()),
                ..AuditFilter::default()
            })
            .unwrap()
            .items;
        let reasons: Vec<(&str, AuditAction, &str)> = audit
            .iter()
            .rev()
            .map(|e| (e.operator.as_str(), e.action, e.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("rebound", AuditAction::Replay, "redrive 1/2 (label L3)"),
                ("rebound", AuditAction::Replay, "redrive 2/2 (label L3)"),
            ],
            "{id}"
        );
        let all = store
            .dead_letters(&DeadLetterFilter {
                message_id: Some(id.clone()),
                ..DeadLetterFilter::default()
            })
            .unwrap()
            .items;
        let statuses: BTreeMap<&str, usize> = all.iter().fold(BTreeMap::new(), |mut m, d| {
            *m.entry(d.status.as_str()).or_default() += 1;
            m
        });
        assert_eq!(statuses, [("dead", 1), ("replayed", 2)].into(), "{id}");
    }
}

/// The shipped rules, with L1 (transient trouble: stock that never came, payments still
/// processing) redriven once, 1 s after each letter.
fn rules_with_l1_redrive() -> tempfile::TempDir {
    let dir = rules_with_redrive();
    std::fs::write(
        dir.path().join("50-labels.yaml"),
        "version: 1\nlabels:\n  L1:\n    redrive: { after: 1s, max: 1 }\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_redriven_letter_meets_a_healed_dependency_and_most_are_acked() {
    let data = tempfile::tempdir().unwrap();
    let rules = rules_with_l1_redrive();
    let out = run_cmd(data.path(), rules.path(), 4_000, 100.0)
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
    assert_eq!(
        r["acked"].as_u64().unwrap() + r["dead_lettered"].as_u64().unwrap(),
        4_000,
        "one fate per message: {r}"
    );
    let store = open_store(data.path());
    let letters = |status| {
        let filter = DeadLetterFilter {
            label: Some("L1".into()),
            status: Some(status),
            limit: 1000,
            ..DeadLetterFilter::default()
        };
        let ids: std::collections::BTreeSet<MessageId> = store
            .dead_letters(&filter)
            .unwrap()
            .items
            .into_iter()
            .map(|d| d.letter.message.id.clone())
            .collect();
        ids
    };
    let redriven = letters(DeadLetterStatus::Replayed);
    let open = letters(DeadLetterStatus::Dead);
    assert!(
        redriven.len() >= 5,
        "the run has L1 letters: {redriven:?}\n{r}"
    );
    // Replay → acked: a redriven order without a letter of its second life was written.
    let healed: Vec<&MessageId> = redriven.iter().filter(|id| !open.contains(*id)).collect();
    for id in &healed {
        let fates = store.known_fates(&[(*id).clone()]).unwrap();
        assert!(
            fates
                .iter()
                .all(|(_, f)| *f == rebound_runtime::store::Fate::Acked),
            "{id}: {fates:?}"
        );
    }
    assert!(
        healed.len() * 2 > redriven.len(),
        "{} of {} redriven letters healed; still open: {open:?}",
        healed.len(),
        redriven.len()
    );
}
