//! rhai bounds at decision time: a guard or script that errors or exceeds a bound makes its
//! rule not match, the decision moves on, and the error is counted for that rule.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rebound_engine::{Attrs, Decision, FailureContext, PolicyHandle, load_dir};
use std::path::Path;
use std::time::Duration;

fn handle(name: &str) -> PolicyHandle {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    PolicyHandle::new(load_dir(&dir).unwrap().expect("fixture set loads"))
}

#[test]
fn runaway_guards_are_stopped_and_the_decision_moves_on() {
    let h = handle("runaway-guards");
    let mut rng = StdRng::seed_from_u64(1);
    let decided = h.decide(&FailureContext::new("ORDER", "DB_LOCK_WAIT", 1), &mut rng);
    assert_eq!(
        decided.decision,
        Decision::Retry {
            delay: Duration::from_millis(250),
            rule: rebound_engine::RuleRef::Rule("fallback".into())
        }
    );
    let set = h.current();
    let errors: Vec<(String, u64)> = set
        .rules()
        .map(|r| (r.id().to_string(), r.error_count()))
        .collect();
    assert_eq!(errors[0], ("spins-forever".into(), 1));
    assert_eq!(errors[1], ("huge-string".into(), 1));
    assert_eq!(errors[2], ("int-overflow".into(), 1));
    assert_eq!(errors[4], ("fallback".into(), 0));
}

#[test]
fn failing_delay_script_makes_the_decision_again_without_that_rule() {
    let h = handle("runaway-guards");
    let mut rng = StdRng::seed_from_u64(1);
    let decided = h.decide(&FailureContext::new("ORDER", "NET_TIMEOUT", 1), &mut rng);
    assert_eq!(decided.decision.rule().as_str(), "fallback");
    let set = h.current();
    assert_eq!(set.rules().nth(3).unwrap().error_count(), 1);
    let explained = h.explain(&FailureContext::new("ORDER", "NET_TIMEOUT", 1), &mut rng);
    let step = explained
        .trace
        .iter()
        .find(|s| s.rule == "script-fails")
        .unwrap();
    assert_eq!(step.result, "script_error");
}

#[test]
fn explain_says_why_each_rule_did_not_decide() {
    let h = handle("scripted");
    let attrs = Attrs::from([("tier".to_string(), "silver".to_string())]);
    let ctx = FailureContext {
        attrs: &attrs,
        elapsed: Duration::from_secs(3600),
        ..FailureContext::new("INVENTORY", "NET_TIMEOUT", 1)
    };
    let explained = h.explain(&ctx, &mut StdRng::seed_from_u64(9));
    let results: Vec<(&str, &str)> = explained
        .trace
        .iter()
        .map(|s| (s.rule.as_str(), s.result))
        .collect();
    assert_eq!(
        results,
        [
            ("storm", "guard_false"),
            ("scripted", "no_match"),
            ("late", "no_match")
        ]
    );
    assert!(
        explained.trace[1]
            .detail
            .as_deref()
            .unwrap()
            .contains("biz 'INVENTORY'")
    );
    assert!(
        explained.trace[2]
            .detail
            .as_deref()
            .unwrap()
            .contains("attrs.tier 'silver' does not match gold*")
    );
    assert_eq!(explained.decided.decision.rule().as_str(), "defaults");
}
