//! `redrives` (rules.md, "match"): a redriven message can be told from a first delivery, by a
//! match key and by the guard variable of the same name, and `explain` says why a rule for
//! redriven messages passed a first delivery by.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rebound_engine::{Decision, FailureContext, PolicyHandle, RuleRef, load_dir};
use std::path::Path;
use std::time::Duration;

fn handle() -> PolicyHandle {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redrives");
    PolicyHandle::new(load_dir(&dir).unwrap().expect("the fixture set loads"))
}

fn decided(h: &PolicyHandle, attempt: u32, redrives: u32) -> (String, Duration) {
    let ctx = FailureContext {
        redrives,
        ..FailureContext::new("PAYMENT", "PAY_PROCESSING", attempt)
    };
    match h.decide(&ctx, &mut StdRng::seed_from_u64(7)).decision {
        Decision::Retry {
            delay,
            rule: RuleRef::Rule(id),
        } => (id.to_string(), delay),
        other => panic!("a retry, not {other:?}"),
    }
}

#[test]
fn a_redriven_message_falls_under_the_rule_for_its_redrives() {
    let h = handle();
    let at = |attempt, redrives| decided(&h, attempt, redrives);
    assert_eq!(at(1, 0), ("payment".into(), Duration::from_millis(100)));
    assert_eq!(
        at(1, 1),
        ("payment-redriven".into(), Duration::from_secs(2))
    );
    assert_eq!(
        at(1, 2),
        ("payment-redriven-often".into(), Duration::from_secs(10))
    );
    // The guard reads `redrives` and `attempt`: at attempt 3 it no longer holds, and the
    // `match` of `payment-redriven` (fewer than 2) does not either.
    assert_eq!(at(3, 2), ("payment".into(), Duration::from_millis(100)));
}

#[test]
fn explain_says_a_first_delivery_is_not_redriven() {
    let h = handle();
    let explained = h.explain(
        &FailureContext::new("PAYMENT", "PAY_PROCESSING", 1),
        &mut StdRng::seed_from_u64(7),
    );
    let text = format!("{explained:?}");
    assert!(text.contains("redrives 0 is not >= 2"), "{text}");
    assert!(text.contains("redrives 0 is not >= 1"), "{text}");
}
