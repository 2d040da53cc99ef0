//! The retry gate (`adaptive::RetryGate`) over a compiled rule set: budgets that hold or dead-letter, breakers that
//! open on their scope's failures, hold its due retries and release them as they ramp.

use std::collections::BTreeMap;
use std::time::Duration;

use rebound_engine::{CompiledSet, FailureContext, SourceFile, compile};
use rebound_runtime::adaptive::{BreakerState, RetryGate};
use rebound_runtime::time::{TimeScale, Timestamp};
use rebound_runtime::topology::{FailureRecord, FuseConfig, Message};
use tokio::time::Instant;

fn set(yaml: &str) -> CompiledSet {
    compile(vec![SourceFile::new("a.yaml", "rules/a.yaml", yaml)]).unwrap()
}

/// A message due again after failing with `code` (attrs `downstream=pg`).
fn retry(id: &str, biz: &str, code: &str) -> Message {
    let mut m = Message::new(id, biz, "{}");
    m.retry.attempt = 1;
    m.retry.failures.push(FailureRecord {
        attempt: 1,
        at: Timestamp::ZERO,
        code: code.into(),
        message: String::new(),
        attrs: [("downstream".to_owned(), "pg".to_owned())].into(),
        rule: rebound_engine::RuleRef::Defaults,
        version: rebound_engine::Version::from_hash(1),
        delay: Some(Duration::from_millis(10)),
    });
    m
}

const REAL: TimeScale = TimeScale::REAL;

/// A gate whose fuse is off: only the set's budgets and breakers act.
fn gate() -> RetryGate {
    let off = FuseConfig {
        enabled: false,
        ..FuseConfig::default()
    };
    RetryGate::new(&off, Instant::now())
}

#[test]
fn a_budget_without_room_holds_its_retries_and_releases_them_as_the_window_moves() {
    let s = set(
        "version: 1\nbudgets:\n  - { id: pay, match: { biz: PAYMENT }, ratio: 0%, min_per_s: 1, window: 2s }\n",
    );
    let gate = gate();
    let t0 = Instant::now();
    let fired = (0..5)
        .filter(|i| gate.admit(&s, REAL, &retry(&format!("m{i}"), "PAYMENT", "X"), t0))
        .count();
    assert_eq!(fired, 2, "the floor: 1/s over 2 s");
    // Out of its scope: not held.
    assert!(gate.admit(&s, REAL, &retry("o", "ORDER", "X"), t0));
    let snap = gate.snapshot(t0);
    assert_eq!(snap.budgets["pay"], (3, 0), "three held, once each");
    // Asked again once the window moved on: they fire, and are not counted held again.
    let later = t0 + Duration::from_secs(2);
    let fired = (2..5)
        .filter(|i| gate.admit(&s, REAL, &retry(&format!("m{i}"), "PAYMENT", "X"), later))
        .count();
    assert_eq!(fired, 2);
    assert_eq!(gate.snapshot(later).budgets["pay"], (3, 0));
}

#[test]
fn a_dead_letter_budget_refuses_the_retry_at_the_decision() {
    let s = set(
        "version: 1\nbudgets:\n  - { id: pay, ratio: 0%, min_per_s: 1, window: 1s, exhausted: dead_letter }\n",
    );
    let gate = gate();
    let t0 = Instant::now();
    let attrs = BTreeMap::new();
    let mut ctx = FailureContext::new("PAYMENT", "X", 1);
    ctx.attrs = &attrs;
    assert!(gate.retry_allowed(&s, REAL, &ctx, t0));
    assert!(gate.admit(&s, REAL, &retry("a", "PAYMENT", "X"), t0));
    assert!(
        !gate.retry_allowed(&s, REAL, &ctx, t0),
        "the one retry a second is used"
    );
    assert_eq!(gate.snapshot(t0).budgets["pay"], (0, 1));
}

#[test]
fn a_breaker_opens_on_its_scopes_failures_holds_due_retries_and_closes_after_the_ramp() {
    let s = set("version: 1
breakers:
  - id: gateway
    match: { biz: PAYMENT, code: NET_TIMEOUT }
    per: attrs.downstream
    open_at: 50%
    min_samples: 4
    window: 10s
    cool_down: 1s
    ramp: 2s
");
    let gate = gate();
    let t0 = Instant::now();
    let attrs: BTreeMap<String, String> = [("downstream".to_owned(), "pg".to_owned())].into();
    let mut failed = FailureContext::new("PAYMENT", "NET_TIMEOUT", 1);
    failed.attrs = &attrs;
    for _ in 0..4 {
        gate.finished(&s, REAL, "PAYMENT", Some(&failed), None, t0);
    }
    assert!(gate.breaker_open(&s, &failed, t0));
    assert!(!gate.admit(&s, REAL, &retry("r", "PAYMENT", "NET_TIMEOUT"), t0));
    // Another biz flows.
    assert!(gate.admit(&s, REAL, &retry("o", "ORDER", "NET_TIMEOUT"), t0));
    // Half-open after the cool-down: a share is released; closed after the ramp: all are.
    let half = t0 + Duration::from_secs(1);
    let released = (0..100)
        .filter(|i| {
            gate.admit(
                &s,
                REAL,
                &retry(&format!("h{i}"), "PAYMENT", "NET_TIMEOUT"),
                half,
            )
        })
        .count();
    assert_eq!(released, 10);
    let closed = t0 + Duration::from_secs(3);
    for _ in 0..8 {
        gate.finished(&s, REAL, "PAYMENT", None, Some(&failed), half);
    }
    assert!((0..100).all(|i| gate.admit(
        &s,
        REAL,
        &retry(&format!("c{i}"), "PAYMENT", "NET_TIMEOUT"),
        closed
    )));
    let snap = gate.snapshot(closed);
    let view = &snap.breakers[&("gateway".to_owned(), "pg".to_owned())];
    assert_eq!(view.state, BreakerState::Closed);
    // Why it opened: its window held 4 failed trees of 4.
    let why: Vec<(u64, u64)> = view
        .openings
        .iter()
        .map(|o| (o.failed, o.samples))
        .collect();
    assert_eq!(why, [(4, 4)]);
    assert_eq!(
        &view.history,
        &[
            BreakerState::Open,
            BreakerState::HalfOpen,
            BreakerState::Closed
        ]
    );
    assert!(!gate.breaker_open(&s, &failed, closed));
}

#[test]
fn failures_without_the_per_value_count_under_none_never_an_empty_key() {
    let s = set("version: 1
breakers:
  - { id: gateway, match: { code: NET_TIMEOUT }, per: attrs.downstream, open_at: 50%, cool_down: 1s }
");
    let gate = gate();
    let t0 = Instant::now();
    let named: BTreeMap<String, String> = [("downstream".to_owned(), "pg".to_owned())].into();
    let empty: BTreeMap<String, String> = [("downstream".to_owned(), String::new())].into();
    let none = BTreeMap::new();
    for attrs in [&named, &empty, &none] {
        let mut failed = FailureContext::new("PAYMENT", "NET_TIMEOUT", 1);
        failed.attrs = attrs;
        gate.finished(&s, REAL, "PAYMENT", Some(&failed), None, t0);
    }
    let keys: Vec<String> = gate
        .snapshot(t0)
        .breakers
        .into_keys()
        .map(|(_, key)| key)
        .collect();
    assert_eq!(keys, ["(none)", "pg"]);
}

#[test]
fn breaker_keys_are_bounded() {
    let s = set(
        "version: 1\nbreakers:\n  - { id: per-code, per: code, open_at: 50%, cool_down: 1s }\n",
    );
    let gate = gate();
    let t0 = Instant::now();
    let attrs = BTreeMap::new();
    let codes: Vec<String> = (0..150).map(|i| format!("C{i}")).collect();
    for code in &codes {
        let mut ctx = FailureContext::new("X", code, 1);
        ctx.attrs = &attrs;
        gate.finished(&s, REAL, "X", Some(&ctx), None, t0);
    }
    let snap = gate.snapshot(t0);
    assert_eq!(snap.breakers.len(), 101, "100 keys and 'other'");
    assert!(
        snap.breakers
            .contains_key(&("per-code".to_owned(), "other".to_owned()))
    );
}

#[test]
fn successes_before_a_keys_first_failure_count_toward_it() {
    let s = set("version: 1
breakers:
  - { id: gateway, match: { code: NET_TIMEOUT }, per: attrs.downstream, open_at: 75%, min_samples: 20, cool_down: 1s }
");
    let gate = gate();
    let t0 = Instant::now();
    // 60 first deliveries that worked (no failure, so no key), then 30 failures from `pg`:
    // a failed share of a third, not all of it.
    for _ in 0..60 {
        gate.finished(&s, REAL, "PAYMENT", None, None, t0);
    }
    let attrs: BTreeMap<String, String> = [("downstream".to_owned(), "pg".to_owned())].into();
    let mut failed = FailureContext::new("PAYMENT", "NET_TIMEOUT", 1);
    failed.attrs = &attrs;
    for _ in 0..30 {
        gate.finished(&s, REAL, "PAYMENT", Some(&failed), None, t0);
    }
    assert!(!gate.breaker_open(&s, &failed, t0));
    // Out of the window, those successes no longer count.
    let later = t0 + Duration::from_secs(11);
    for _ in 0..20 {
        gate.finished(&s, REAL, "PAYMENT", Some(&failed), None, later);
    }
    assert!(gate.breaker_open(&s, &failed, later));
}

#[test]
fn the_fuse_is_the_breaker_for_everything_and_is_reported_as_one() {
    // No budgets or breakers in the set: the fuse alone holds the retries back.
    let s = set("version: 1\n");
    let fuse = FuseConfig {
        enabled: true,
        window: Duration::from_secs(1),
        threshold: 0.5,
        min_samples: 10,
    };
    // Made a window ago: past its first window, it judges by its failure rate.
    let t0 = Instant::now() + Duration::from_secs(1);
    let gate = RetryGate::new(&fuse, t0 - Duration::from_secs(1));
    assert!(gate.admit(&s, REAL, &retry("a", "ORDER", "X"), t0));
    assert!(
        gate.snapshot(t0).breakers.is_empty(),
        "a fuse never opened is not reported"
    );
    gate.fuse_finished(2, 10, t0);
    let view = gate.fuse(t0);
    assert!(view.open && view.holding);
    assert!((view.fail_rate - 10.0 / 12.0).abs() < 1e-9);
    assert!(!gate.admit(&s, REAL, &retry("b", "ORDER", "X"), t0));
    assert!(!gate.fuse_admits(&"b".into(), t0));
    // After half a window half-open: a tenth of the retries asked fire at first.
    let half = t0 + Duration::from_millis(500);
    assert!(gate.fuse(half).open && !gate.fuse(half).holding);
    let fired = (0..50)
        .filter(|i| gate.fuse_admits(&format!("h{i}").as_str().into(), half))
        .count();
    assert_eq!(fired, 5);
    // After the ramp closed: everything fires, and the report shows the states in order.
    let closed = t0 + Duration::from_secs(1);
    assert!(!gate.fuse(closed).open);
    assert!(gate.admit(&s, REAL, &retry("c", "ORDER", "X"), closed));
    let snap = gate.snapshot(closed);
    let view = &snap.breakers[&("fuse".to_owned(), String::new())];
    assert_eq!(view.state, BreakerState::Closed);
    assert_eq!(view.openings.len(), 1);
    // It opened at its tenth sample, all ten failed.
    assert_eq!(
        (view.openings[0].failed, view.openings[0].samples),
        (10, 10)
    );
    assert_eq!(
        (view.openings[0].open_at, view.openings[0].min_samples),
        (Some(0.5), 10)
    );
    assert_eq!(
        &view.history,
        &[
            BreakerState::Open,
            BreakerState::HalfOpen,
            BreakerState::Closed
        ]
    );
}

#[test]
fn a_breaker_opens_on_its_bizs_heat_holds_its_retries_and_leaves_other_scopes_alone() {
    let s = set("version: 1
breakers:
  - { id: hot-network, match: { code: NET_TIMEOUT }, per: attrs.downstream, open_on_heat: 5, cool_down: 1s }
");
    let gate = gate();
    let t0 = Instant::now();
    let attrs: BTreeMap<String, String> = [("downstream".to_owned(), "pg".to_owned())].into();
    let mut failed = FailureContext::new("PAYMENT", "NET_TIMEOUT", 1);
    failed.attrs = &attrs;
    // Cool: every tree failing opens nothing (it has no open_at).
    for _ in 0..50 {
        gate.finished(&s, REAL, "PAYMENT", Some(&failed), None, t0);
    }
    gate.heat_seen(&s, REAL, &failed, 4.0, t0);
    assert!(!gate.breaker_open(&s, &failed, t0));
    // Out of its scope, however hot: nothing.
    let other = FailureContext::new("PAYMENT", "DB_LOCK", 1);
    gate.heat_seen(&s, REAL, &other, 100.0, t0);
    assert!(!gate.breaker_open(&s, &failed, t0));
    // Hot: open for its key, its due retries held.
    gate.heat_seen(&s, REAL, &failed, 5.5, t0);
    assert!(gate.breaker_open(&s, &failed, t0));
    assert!(!gate.admit(&s, REAL, &retry("m1", "PAYMENT", "NET_TIMEOUT"), t0));
    let snap = gate.snapshot(t0);
    let view = &snap.breakers[&("hot-network".to_owned(), "pg".to_owned())];
    assert_eq!(view.state, BreakerState::Open);
    assert_eq!(view.openings[0].heat, Some((5.5, 5.0)));
}
