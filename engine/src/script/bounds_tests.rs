//! The sandbox's bounds: unknown functions at load, the wall-time bound at load and at
//! decision time.

use super::*;
use crate::load::read_dir;
use crate::types::{Decision, RuleRef};
use rand::SeedableRng;
use rand::rngs::StdRng;

/// About 30,000 operations: well past 100 µs, well under the operations bound.
const SLOW: &str = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19].map(|i| [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19].map(|j| [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19].map(|k| i * j * k).len()).len()).len() > 0";

#[test]
fn calling_sleep_is_an_unknown_function_at_its_position() {
    let err = ScriptEngine::new()
        .compile("attempt > 1 && sleep(100000) == ()")
        .unwrap_err();
    assert!(
        err.message.starts_with("unknown function 'sleep'"),
        "{err:?}"
    );
    assert_eq!(err.at, Some((1, 16)));
    let method = ScriptEngine::new()
        .compile("code.sleep() == ()")
        .unwrap_err();
    assert!(
        method.message.starts_with("unknown function 'sleep'"),
        "{method:?}"
    );
    for banned in ["exit()", "timestamp() > 0", "parse_json(code) == ()"] {
        let err = ScriptEngine::new().compile(banned).unwrap_err();
        assert!(
            err.message.starts_with("unknown function"),
            "{banned}: {err:?}"
        );
    }
}

#[test]
fn closures_and_pure_functions_compile() {
    let e = ScriptEngine::new();
    for ok in [
        "code.starts_with(\"NET\") && attempt.to_string().len() == 1",
        "[1, 2, 3].map(|x| x * attempt).reduce(|s, x| s + x, 0) > 0",
        "min(attempt, 3) == attempt && type_of(code) == \"string\"",
    ] {
        assert!(e.compile(ok).is_ok(), "{ok}");
    }
}

#[test]
fn an_expression_past_the_wall_time_bound_is_stopped_within_its_operations() {
    let c = FailureContext::sample();
    let roomy = ScriptEngine::with_wall_limit(Duration::from_secs(60));
    let slow = roomy.compile(SLOW).unwrap();
    // Within the operations bound: with room, it finishes.
    assert_eq!(roomy.guard(&slow, &c), Ok(true));
    let tight = ScriptEngine::with_wall_limit(Duration::from_micros(100));
    let slow = tight.compile(SLOW).unwrap();
    let err = tight.guard(&slow, &c).unwrap_err();
    assert!(err.0.contains("ran longer than the bound"), "{err}");
    // The next evaluation on this thread has a deadline of its own.
    let quick = tight.compile("attempt == 1").unwrap();
    assert_eq!(tight.guard(&quick, &c), Ok(true));
}

#[test]
fn a_guard_past_the_wall_time_bound_is_counted_and_the_decision_moves_on() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/slow-guard");
    let tight = ScriptEngine::with_wall_limit(Duration::from_micros(100));
    let set = crate::compile::compile_with(read_dir(&dir).unwrap(), tight).expect("the set loads");
    // The load-time sample evaluation has the same bound: a warning, the set still loads.
    let warning = set
        .warnings()
        .iter()
        .find(|w| w.message.contains("ran longer than the bound"))
        .expect("a warning for the sample evaluation");
    assert_eq!(
        (warning.line, warning.column),
        (Some(5), Some(9)),
        "{warning:?}"
    );
    let handle = crate::PolicyHandle::new(set);
    let decided = handle.decide(
        &FailureContext::new("ORDER", "DB_LOCK_WAIT", 1),
        &mut StdRng::seed_from_u64(1),
    );
    assert_eq!(
        decided.decision,
        Decision::Retry {
            delay: Duration::from_millis(250),
            rule: RuleRef::Rule("fallback".into())
        }
    );
    let set = handle.current();
    assert_eq!(set.rules[0].error_count(), 1);
    assert_eq!(set.rules[1].error_count(), 0);
}

#[test]
fn a_set_calling_sleep_is_rejected_with_the_position() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sleeping-guard");
    let rejected = crate::compile(read_dir(&dir).unwrap()).unwrap_err();
    let error = &rejected.0[0];
    assert!(
        error.message.contains("unknown function 'sleep'"),
        "{error:?}"
    );
    assert_eq!((error.line, error.column), (Some(6), Some(25)), "{error:?}");
}

#[test]
fn conversions_work_with_the_packages_in_one_module() {
    let e = ScriptEngine::new();
    let x = e.compile("'a'.to_int() == 97 && 5.to_int() == 5").unwrap();
    assert_eq!(e.guard(&x, &FailureContext::sample()), Ok(true));
}
