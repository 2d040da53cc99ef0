//! What a decision allocates, counted on this thread by the binary's allocator: nothing at
//! all for a structured rule or a guard of plain comparisons, whatever signals the runtime
//! hands over; and for a guard that needs rhai, only what rhai needs for itself: the
//! variables live in a scope kept per thread, and signal names that come from a map are
//! copied into it once, not per decision.

use crate::counting::allocations;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::{Attrs, FailureContext, PolicyHandle, SignalView, Signals, SourceFile};
use std::hint::black_box;

const RULES: &str = "version: 1
rules:
  - id: structured
    match: { biz: ORDER, code: DB_LOCK_WAIT, attempt: \"<= 5\" }
    retry: { max_retries: 5, backoff: { exponential: { base: 100ms, max: 30s }, jitter: equal } }
  - id: gives-up
    match: { code: BAD_JSON }
    give_up: true
    dead_letter: L3
  - id: guarded
    match: { code: NET_TIMEOUT }
    if: 'signals.fail_rate > 0.5 && attrs.tenant != \"x\"'
    retry: { backoff: { fixed: 1s } }
  - id: scripted
    match: { code: NET_SLOW }
    if: 'signals.fail_rate * 2.0 > 1.0 && biz.len() > 0'
    retry: { backoff: { fixed: 1s } }
";

/// The runtime's four signals, as it hands them over: pairs on its stack.
const PAIRS: [(&str, f64); 4] = [
    ("fail_rate", 0.9),
    ("retry_queue_depth", 12.0),
    ("pending", 3.0),
    ("fuse_open", 0.0),
];

fn handle() -> PolicyHandle {
    let set = rebound_engine::compile(vec![SourceFile::new("a.yaml", "a.yaml", RULES)]).unwrap();
    PolicyHandle::new(set)
}

/// Allocations of one decision of `code` with `signals`, after a warm-up decision.
fn per_decision(handle: &PolicyHandle, code: &str, signals: SignalView<'_>) -> u64 {
    let attrs = Attrs::new();
    let ctx = FailureContext {
        attrs: &attrs,
        signals,
        ..FailureContext::new("ORDER", code, 2)
    };
    let mut rng = SmallRng::seed_from_u64(1);
    black_box(handle.decide(&ctx, &mut rng));
    allocations(|| {
        black_box(handle.decide(black_box(&ctx), &mut rng));
    })
}

#[test]
fn a_decision_without_a_script_allocates_nothing() {
    let h = handle();
    let map: Signals = PAIRS.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    for code in ["DB_LOCK_WAIT", "BAD_JSON", "NOTHING_MATCHES"] {
        assert_eq!(
            per_decision(&h, code, SignalView::Pairs(&PAIRS)),
            0,
            "{code}"
        );
        assert_eq!(per_decision(&h, code, SignalView::Map(&map)), 0, "{code}");
        assert_eq!(per_decision(&h, code, SignalView::NONE), 0, "{code}");
    }
}

#[test]
fn a_guard_of_plain_comparisons_allocates_nothing() {
    let h = handle();
    let map: Signals = PAIRS.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    assert_eq!(
        per_decision(&h, "NET_TIMEOUT", SignalView::Pairs(&PAIRS)),
        0
    );
    assert_eq!(per_decision(&h, "NET_TIMEOUT", SignalView::Map(&map)), 0);
}

#[test]
fn a_guard_in_rhai_copies_no_signal_names_per_decision() {
    let h = handle();
    let map: Signals = PAIRS.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    let from_pairs = per_decision(&h, "NET_SLOW", SignalView::Pairs(&PAIRS));
    let from_map = per_decision(&h, "NET_SLOW", SignalView::Map(&map));
    assert_eq!(from_map, from_pairs);
}
