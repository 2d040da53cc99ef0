use super::*;
use crate::backoff::jitter_rng;
use crate::context::OwnedFailure;
use crate::release::logged::LoggedContext;
use crate::release::logged::jitter_seed;
use crate::{SourceFile, compile};
use proptest::prelude::*;

/// The shipped rules (`rules/`), the set the logs below were decided by.
const SHIPPED: [(&str, &str); 7] = [
    (
        "00-defaults.yaml",
        include_str!("../../../rules/00-defaults.yaml"),
    ),
    (
        "10-poison.yaml",
        include_str!("../../../rules/10-poison.yaml"),
    ),
    (
        "20-payment.yaml",
        include_str!("../../../rules/20-payment.yaml"),
    ),
    (
        "30-inventory.yaml",
        include_str!("../../../rules/30-inventory.yaml"),
    ),
    (
        "40-infrastructure.yaml",
        include_str!("../../../rules/40-infrastructure.yaml"),
    ),
    (
        "50-labels.yaml",
        include_str!("../../../rules/50-labels.yaml"),
    ),
    (
        "60-adaptive.yaml",
        include_str!("../../../rules/60-adaptive.yaml"),
    ),
];

/// `payment-processing` polls every 250ms instead of 100ms.
const SLOWER_PROCESSING: &str =
    include_str!("../../tests/fixtures/whatif/slower-processing/20-payment.yaml");
/// `panic` gives up at once instead of retrying once.
const PANIC_GIVES_UP: &str =
    include_str!("../../tests/fixtures/whatif/panic-gives-up/10-poison.yaml");

/// The shipped set with the files of `replaced` in place of theirs.
fn set_with(replaced: &[(&str, &str)]) -> CompiledSet {
    let files = SHIPPED
        .iter()
        .map(|&(name, shipped)| {
            let bytes = replaced
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(shipped, |(_, b)| b);
            SourceFile::new(name, format!("rules/{name}"), bytes)
        })
        .collect();
    compile(files).expect("the fixture compiles")
}

fn shipped() -> CompiledSet {
    set_with(&[])
}

/// The log `set` would write deciding `failures` (message `m-N` for the Nth).
fn log_of(set: &CompiledSet, failures: &[OwnedFailure]) -> Vec<LoggedDecision> {
    failures
        .iter()
        .enumerate()
        .map(|(n, failure)| {
            let id = format!("m-{n}");
            let seed = jitter_seed(&id, failure.attempt, failure.redrives);
            let ctx = failure.context();
            let decided = set.decide(&ctx, &mut jitter_rng(seed));
            LoggedDecision {
                id,
                context: LoggedContext::of(&ctx, seed),
                outcome: Outcome::of(&decided),
                arm: None,
            }
        })
        .collect()
}

fn failure(biz: &str, code: &str, attempt: u32) -> OwnedFailure {
    OwnedFailure {
        biz: biz.into(),
        code: code.into(),
        attempt,
        elapsed: std::time::Duration::from_millis(u64::from(attempt) * 700),
        now: 1_780_000_000_000 + u64::from(attempt),
        ..OwnedFailure::default()
    }
}

/// Every shipped rule's codes, attempts 1 to 7, a few times each.
fn mixed_failures() -> Vec<OwnedFailure> {
    let kinds = [
        ("ORDER", "BAD_JSON"),
        ("ORDER", "PANIC"),
        ("PAYMENT", "PAY_PROCESSING"),
        ("PAYMENT", "PAY_FAILED"),
        ("PAYMENT", "RATE_LIMITED"),
        ("INVENTORY", "STOCK_INSUFFICIENT"),
        ("ORDER", "DB_LOCK_WAIT"),
        ("ORDER", "NET_TIMEOUT"),
        ("ORDER", "TIMEOUT"),
        ("ORDER", "SOMETHING_ELSE"),
    ];
    let mut out = Vec::new();
    for round in 0..3 {
        for (biz, code) in kinds {
            for attempt in 1..=7 {
                let mut f = failure(biz, code, attempt);
                f.now += round;
                out.push(f);
            }
        }
    }
    out
}

#[test]
fn a_set_against_its_own_log_changes_nothing() {
    let set = shipped();
    let log = log_of(&set, &mixed_failures());
    let answer = what_if(&set, &log);
    assert_eq!(answer.total, log.len() as u64);
    assert_eq!(answer.changed, 0);
    assert!(answer.by.is_empty());
    assert_eq!(answer.version.as_deref(), Some(set.version().as_str()));
    assert_eq!(answer.candidate, set.version().as_str());
}

#[test]
fn a_changed_delay_shows_exactly_that_rules_retries_as_changed() {
    let log = log_of(&shipped(), &mixed_failures());
    let candidate = set_with(&[("20-payment.yaml", SLOWER_PROCESSING)]);
    let answer = what_if(&candidate, &log);

    let retried =
        |d: &&LoggedDecision| d.outcome.rule == "payment-processing" && d.outcome.action == "retry";
    let expected = log.iter().filter(retried).count() as u64;
    assert_eq!(expected, 9, "3 rounds of attempts 1 to 3");
    assert_eq!(answer.changed, expected);
    assert_eq!(answer.by.len(), 1);
    let row = &answer.by[0];
    let verdict = Verdict {
        rule: "payment-processing".into(),
        action: "retry".into(),
        label: None,
    };
    assert_eq!((&row.old, &row.new), (&verdict, &verdict));
    assert_eq!(row.count, expected);
    let (old, new) = (row.delay_ms.old, row.delay_ms.new);
    assert_eq!((old.p50, old.p99), (Some(100), Some(100)));
    assert_eq!((new.p50, new.p99), (Some(250), Some(250)));
    assert_ne!(answer.candidate, answer.version.clone().unwrap());
}

#[test]
fn a_changed_action_is_a_row_from_the_old_verdict_to_the_new() {
    let log = log_of(&shipped(), &mixed_failures());
    let candidate = set_with(&[("10-poison.yaml", PANIC_GIVES_UP)]);
    let answer = what_if(&candidate, &log);

    // Attempt 1 retried once; attempt 2 and later were already dead letters.
    assert_eq!(answer.changed, 3);
    let row = &answer.by[0];
    assert_eq!(row.old.action, "retry");
    assert_eq!(row.old.label, None);
    assert_eq!(row.new.rule, "panic");
    assert_eq!(row.new.action, "dead_letter");
    assert_eq!(row.new.label.as_deref(), Some("L3"));
    assert_eq!(
        (row.delay_ms.old.p50, row.delay_ms.old.p99),
        (Some(5000), Some(5000))
    );
    assert_eq!((row.delay_ms.new.p50, row.delay_ms.new.p99), (None, None));
    for example in &row.examples {
        assert_eq!(example["code"], "PANIC");
        assert_eq!(example["attempt"], 1);
    }
}

#[test]
fn examples_are_the_first_five_replayable_bodies_with_their_ids() {
    let failures: Vec<_> = (0..8)
        .map(|_| failure("PAYMENT", "PAY_PROCESSING", 1))
        .collect();
    let log = log_of(&shipped(), &failures);
    let answer = what_if(&set_with(&[("20-payment.yaml", SLOWER_PROCESSING)]), &log);
    let row = &answer.by[0];
    assert_eq!(row.count, 8);
    assert_eq!(row.examples.len(), EXAMPLES);
    for (n, example) in row.examples.iter().enumerate() {
        let mut body = log[n].context.decide_body();
        body.as_object_mut()
            .unwrap()
            .insert("id".into(), format!("m-{n}").into());
        assert_eq!(example, &body);
    }
}

#[test]
fn rows_are_sorted_by_count_then_by_verdicts() {
    let mut failures = vec![failure("ORDER", "PANIC", 1)];
    failures.extend((0..3).map(|_| failure("PAYMENT", "PAY_PROCESSING", 2)));
    let candidate = set_with(&[
        ("10-poison.yaml", PANIC_GIVES_UP),
        ("20-payment.yaml", SLOWER_PROCESSING),
    ]);
    let answer = what_if(&candidate, &log_of(&shipped(), &failures));
    let rules: Vec<_> = answer
        .by
        .iter()
        .map(|r| (r.old.rule.as_str(), r.count))
        .collect();
    assert_eq!(rules, [("payment-processing", 3), ("panic", 1)]);

    // Equal counts: by the old verdict.
    let failures = [
        failure("PAYMENT", "PAY_PROCESSING", 1),
        failure("ORDER", "PANIC", 1),
    ];
    let answer = what_if(&candidate, &log_of(&shipped(), &failures));
    let rules: Vec<_> = answer.by.iter().map(|r| r.old.rule.as_str()).collect();
    assert_eq!(rules, ["panic", "payment-processing"]);
}

#[test]
fn the_version_is_the_set_that_decided_the_newest_entry() {
    let newer = set_with(&[("20-payment.yaml", SLOWER_PROCESSING)]);
    let mut log = log_of(&shipped(), &[failure("ORDER", "PANIC", 1)]);
    log.extend(log_of(&newer, &[failure("ORDER", "PANIC", 1)]));
    let answer = what_if(&shipped(), &log);
    assert_eq!(answer.version.as_deref(), Some(newer.version().as_str()));
    assert_eq!(answer.changed, 0, "payment-processing decided none of them");
}

#[test]
fn an_empty_log_has_no_version_and_nothing_changed() {
    let set = shipped();
    let answer = what_if(&set, &[]);
    assert_eq!(answer.version, None);
    assert_eq!((answer.total, answer.changed), (0, 0));
    assert!(answer.by.is_empty());
}

#[test]
fn the_answer_serializes_to_the_contracts_shape() {
    let log = log_of(&shipped(), &[failure("ORDER", "PANIC", 1)]);
    let answer = what_if(&set_with(&[("10-poison.yaml", PANIC_GIVES_UP)]), &log);
    let json = serde_json::to_value(&answer).unwrap();
    let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["by", "candidate", "changed", "total", "version"]);
    let row = &json["by"][0];
    assert_eq!(
        row["old"],
        serde_json::json!({"rule": "panic", "action": "retry", "label": null})
    );
    assert_eq!(
        row["new"],
        serde_json::json!({"rule": "panic", "action": "dead_letter", "label": "L3"})
    );
    assert_eq!(row["count"], 1);
    assert_eq!(
        row["delay_ms"],
        serde_json::json!({"old": {"p50": 5000, "p99": 5000}, "new": {"p50": null, "p99": null}})
    );
    assert_eq!(row["examples"][0]["id"], "m-0");
    assert_eq!(row["examples"][0]["now"], "2026-05-28T20:26:40.001Z");
}

#[test]
fn quantiles_are_nearest_rank() {
    let q = Quantiles::of((1..=100).rev().collect());
    assert_eq!((q.p50, q.p99), (Some(50), Some(99)));
    let q = Quantiles::of(vec![7]);
    assert_eq!((q.p50, q.p99), (Some(7), Some(7)));
    let q = Quantiles::of(vec![2, 1]);
    assert_eq!((q.p50, q.p99), (Some(1), Some(2)));
    let q = Quantiles::of((1..=1000).collect());
    assert_eq!((q.p50, q.p99), (Some(500), Some(990)));
    assert_eq!(
        Quantiles::of(Vec::new()),
        Quantiles {
            p50: None,
            p99: None
        }
    );
}

/// A failure of the shipped rules' vocabulary (and an unknown code), anywhere on its path,
/// in whole milliseconds as the log keeps it.
fn any_failure() -> impl Strategy<Value = OwnedFailure> {
    let biz = prop::sample::select(vec!["ORDER", "PAYMENT", "INVENTORY", "OTHER"]);
    let code = prop::sample::select(vec![
        "BAD_JSON",
        "PANIC",
        "PAY_PROCESSING",
        "RATE_LIMITED",
        "STOCK_INSUFFICIENT",
        "DB_LOCK_WAIT",
        "NET_TIMEOUT",
        "TIMEOUT",
        "UNKNOWN",
    ]);
    (
        biz,
        code,
        1..=9u32,
        0..=2u32,
        0..=600_000u64,
        prop::option::of(0..=120_000u64),
        0..=60_000u64,
        prop::option::of(prop::sample::select(vec!["r-1", ""])),
        1_577_836_800_000..=2_208_988_800_000u64,
    )
        .prop_map(
            |(biz, code, attempt, redrives, elapsed, retry_after, last, reservation, now)| {
                let mut attrs = crate::context::Attrs::default();
                if let Some(r) = reservation {
                    attrs.insert("reservation".into(), r.into());
                }
                OwnedFailure {
                    biz: biz.into(),
                    code: code.into(),
                    attempt,
                    redrives,
                    elapsed: std::time::Duration::from_millis(elapsed),
                    retry_after: retry_after.map(std::time::Duration::from_millis),
                    last_delay: std::time::Duration::from_millis(last),
                    attrs,
                    now,
                    ..OwnedFailure::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The shipped set has full, equal and decorrelated jitter: the seed in the log is what
    /// keeps its own decisions unchanged.
    #[test]
    fn a_set_against_its_own_log_changes_zero_whatever_the_contexts(
        failures in prop::collection::vec(any_failure(), 1..40)
    ) {
        let set = shipped();
        let log = log_of(&set, &failures);
        let answer = what_if(&set, &log);
        prop_assert_eq!(answer.total, failures.len() as u64);
        prop_assert_eq!(answer.changed, 0);
        prop_assert!(answer.by.is_empty());
    }

    /// The other side of the same coin: a seed other than the logged one moves jittered
    /// delays, so the property above is not true by construction.
    #[test]
    fn another_seed_would_move_jittered_delays(attempt in 2..=5u32) {
        let set = shipped();
        let mut log = log_of(&set, &(0..20).map(|_| failure("PAYMENT", "RATE_LIMITED", attempt)).collect::<Vec<_>>());
        for (n, entry) in log.iter_mut().enumerate() {
            entry.context.seed = entry.context.seed.wrapping_add(n as u64 + 1);
        }
        prop_assert!(what_if(&set, &log).changed > 0);
    }
}
