//! The release state as a policy's decisions use it: the log, the shadow, the canary.

use std::sync::Arc;
use std::time::Duration;

use rebound_engine::backoff::jitter_rng;
use rebound_engine::release::{Arm, Outcome, Slice};
use rebound_engine::{CompiledSet, FailureContext, PolicyHandle, SourceFile, compile};

use super::{LogOptions, Observed, Release};
use crate::fate::{Decision, FailurePolicy};
use crate::policy::{RulePolicy, TimeScale};
use crate::topology::{Key, Message};

const STABLE: &str = "version: 1
defaults:
  retry: { max_retries: 3, backoff: { exponential: { base: 1s, max: 1m }, jitter: full } }
  dead_letter: L2
rules:
  - id: bad
    match: { code: BAD_JSON }
    give_up: true
    dead_letter: L3
";

fn set(yaml: &str) -> CompiledSet {
    compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap()
}

/// Gives up on everything: under label `CANARY`.
fn drastic() -> Arc<CompiledSet> {
    Arc::new(set(&STABLE.replace(
        "rules:\n",
        "rules:\n  - id: all\n    match: {}\n    give_up: true\n    dead_letter: CANARY\n",
    )))
}

fn policy(release: &Arc<Release>, scale: f64) -> RulePolicy {
    RulePolicy::new(
        Arc::new(PolicyHandle::new(set(STABLE))),
        TimeScale::new(scale).unwrap(),
    )
    .with_release(Arc::clone(release))
}

fn message(i: usize, attempt: u32) -> Message {
    let mut m = Message::new(format!("m-{i}"), "ORDER", "{}");
    m.retry.attempt = attempt;
    m
}

fn decide(p: &RulePolicy, m: &Message, code: &str) -> rebound_engine::Decided {
    let mut ctx = FailureContext::new(&m.biz, code, m.retry.attempt);
    ctx.elapsed = Duration::from_millis(40);
    ctx.now = 1_700_000_000_000;
    p.decide(&ctx, m)
}

#[test]
fn every_decision_is_logged_in_the_rules_time_and_decides_again_as_it_did() {
    let release = Release::new(LogOptions::default());
    let p = policy(&release, 10.0);
    let decided: Vec<_> = (0..50)
        .map(|i| decide(&p, &message(i, 1 + (i % 3) as u32), "TIMEOUT"))
        .collect();
    let logged = release
        .log()
        .take()
        .iter()
        .flat_map(|p| p.decisions())
        .collect::<Vec<_>>();
    assert_eq!(logged.len(), 50);
    let again = set(STABLE);
    for (entry, acted) in logged.iter().zip(&decided) {
        // The context as the rules saw it: elapsed × 10.
        assert_eq!(entry.context.elapsed_ms, 400);
        let replay = again.decide(
            &entry.context.failure().context(),
            &mut jitter_rng(entry.context.seed),
        );
        assert_eq!(Outcome::of(&replay), entry.outcome);
        // What was acted on is the same decision, its delay in real time.
        match (&acted.decision, entry.outcome.delay_ms) {
            (Decision::Retry { delay, .. }, Some(rules_ms)) => {
                assert_eq!(delay.as_millis() as u64, rules_ms / 10)
            }
            (Decision::DeadLetter { .. }, None) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(entry.arm, None);
    }
    assert!(release.log().take().is_empty());
    assert_eq!(release.log().recorded(), 50);
}

#[test]
fn a_sample_takes_its_share_and_a_log_that_keeps_nothing_records_nothing() {
    let half = Release::new(LogOptions {
        sample: 0.5,
        keep: 10,
    });
    let p = policy(&half, 1.0);
    for i in 0..2_000 {
        decide(&p, &message(i, 1), "TIMEOUT");
    }
    let n = half.log().recorded();
    assert!((800..1_200).contains(&n), "{n} of 2000");
    let off = Release::new(LogOptions::OFF);
    let p = policy(&off, 1.0);
    for i in 0..100 {
        decide(&p, &message(i, 1), "TIMEOUT");
    }
    assert!(off.log().take().is_empty());
}

#[test]
fn a_shadow_decides_every_failure_and_is_never_acted_on() {
    let release = Release::new(LogOptions::OFF);
    let p = policy(&release, 1.0);
    assert!(release.shadow().is_none());
    release.set_shadow(drastic());
    for i in 0..30 {
        let code = if i % 3 == 0 { "BAD_JSON" } else { "TIMEOUT" };
        let acted = decide(&p, &message(i, 1), code);
        // The stable set's decision is what the runtime gets.
        match (code, &acted.decision) {
            ("BAD_JSON", Decision::DeadLetter { label, .. }) => assert_eq!(label.as_str(), "L3"),
            ("TIMEOUT", Decision::Retry { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    let report = release.shadow().unwrap();
    assert_eq!(report.version, *drastic().version());
    assert_eq!((report.decisions, report.changed), (30, 30));
    let rows: Vec<_> = report
        .by
        .iter()
        .map(|r| {
            (
                r.old.rule.as_str(),
                r.old.action.as_str(),
                r.new.label.as_deref(),
                r.count,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("defaults", "retry", Some("CANARY"), 20),
            ("bad", "dead_letter", Some("CANARY"), 10)
        ]
    );
    // The same set as a shadow changes nothing, jitter included.
    release.set_shadow(Arc::new(set(STABLE)));
    for i in 0..30 {
        decide(&p, &message(i, 2), "TIMEOUT");
    }
    let same = release.shadow().unwrap();
    assert_eq!((same.decisions, same.changed), (30, 0));
    assert!(release.clear_shadow());
    assert!(!release.clear_shadow());
}

#[test]
fn a_canary_decides_for_its_slice_by_key_and_counts_each_arm() {
    let release = Release::new(LogOptions::default());
    let p = policy(&release, 1.0);
    release.set_canary(drastic(), Slice::new(50.0, vec![]));
    let mut arms = [0usize; 2];
    for i in 0..400 {
        let mut m = message(i, 1);
        m.key = Some(Key::from(format!("key-{}", i % 40)));
        p.observe(&m, Observed::Delivered);
        let decided = decide(&p, &m, "TIMEOUT");
        let canary = Slice::new(50.0, vec![]).arm("ORDER", m.key.as_ref().unwrap().as_str());
        match (&decided.decision, canary) {
            (Decision::DeadLetter { label, .. }, Arm::Canary) => {
                assert_eq!(label.as_str(), "CANARY");
                p.observe(&m, Observed::DeadLettered);
                arms[1] += 1;
            }
            (Decision::Retry { .. }, Arm::Stable) => {
                m.retry.attempt = 2;
                p.observe(&m, Observed::Delivered);
                p.observe(&m, Observed::Acked);
                arms[0] += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(arms[0] > 100 && arms[1] > 100, "{arms:?}");
    let f = release.canary().unwrap();
    assert_eq!(f.canary.first_deliveries, arms[1] as u64);
    assert_eq!(f.canary.dead_letters, arms[1] as u64);
    assert_eq!(f.canary.dead_letter_ratio(), 1.0);
    assert_eq!(f.stable.first_deliveries, arms[0] as u64);
    assert_eq!(f.stable.retries, arms[0] as u64);
    assert_eq!(f.stable.retry_ratio(), 1.0);
    assert_eq!(f.stable.acked_by_attempt[1], arms[0] as u64);
    // Each logged decision names its arm.
    let logged = release
        .log()
        .take()
        .iter()
        .flat_map(|p| p.decisions())
        .collect::<Vec<_>>();
    assert_eq!(
        logged.iter().filter(|e| e.arm == Some(Arm::Canary)).count(),
        arms[1]
    );
    let ended = release.clear_canary().unwrap();
    assert_eq!(ended.canary.dead_letters, arms[1] as u64);
    assert!(release.canary().is_none());
    // Without a canary every message is the stable set's again, and nothing is counted.
    let m = message(7, 1);
    assert!(matches!(
        decide(&p, &m, "TIMEOUT").decision,
        Decision::Retry { .. }
    ));
    p.observe(&m, Observed::Delivered);
}
