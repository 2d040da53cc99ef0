//! The fast tree against rhai: the same guard, the same failure, the same answer.

use super::*;
use crate::context::{HeaderMap, SignalView, Signals};
use crate::script::ScriptEngine;
use proptest::prelude::*;
use std::time::Duration;

fn fast(source: &str) -> Option<Fast> {
    ScriptEngine::new()
        .compile(source)
        .unwrap()
        .fast
        .map(|f| (*f).clone())
}

#[test]
fn plain_comparisons_get_a_tree_and_anything_else_runs_in_rhai() {
    for plain in [
        "signals.fail_rate > 0.5 && attempt < 10",
        r#"attrs["tenant"] == "vip" || headers.region != () && !(code == "X")"#,
        "retry_after == () && elapsed >= 1000 && last_delay < 5.5 && now > 0",
        "true",
        r#"biz <= "M" && signals["depth"] >= 3"#,
    ] {
        assert!(fast(plain).is_some(), "{plain}");
    }
    for other in [
        "attempt + 1 > 3",
        "hour_of_day(now, 1) < 9",
        "attrs.tenant.len() > 3",
        "[1, 2].map(|x| x * attempt).len() > 0",
        "signals?.fail_rate > 0.5",
        "attrs[code] == ()",
        "code == 'a'",
        "attrs == #{}",
    ] {
        assert!(fast(other).is_none(), "{other}");
    }
}

#[test]
fn number_comparisons_keep_rhais_epsilon_and_its_nan() {
    let e = ScriptEngine::new();
    let pairs = [
        ("x", 0.1 + 0.2),
        ("nan", f64::NAN),
        ("inf", f64::INFINITY),
        ("zero", -0.0),
    ];
    let ctx = FailureContext {
        signals: SignalView::Pairs(&pairs),
        ..FailureContext::new("B", "C", 3)
    };
    // 0.1 + 0.2 is 0.30000000000000004, which rhai calls equal to 0.3; and rhai finds NaN
    // equal to 0. Every pair of these, both ways round, under every operator.
    let numbers = [
        "0",
        "3",
        "attempt",
        "0.0",
        "0.3",
        "3.0",
        "signals.x",
        "signals.nan",
        "signals.inf",
        "signals.zero",
        "signals.none",
    ];
    for a in numbers {
        for b in numbers {
            for op in ["==", "!=", "<", "<=", ">", ">="] {
                let source = format!("{a} {op} {b}");
                let expr = e.compile(&source).unwrap();
                let want = e.eval(&expr, &ctx).unwrap().as_bool().unwrap();
                let tree = expr.fast.as_ref().expect("a tree");
                assert_eq!(tree.guard(&ctx), Some(want), "{source}");
            }
        }
    }
}

const WORDS: [&str; 6] = ["", "A", "M", "acme", "vip", "PAYMENT"];
const FLOATS: [&str; 10] = [
    "0.0",
    "-0.0",
    "0.5",
    "0.9",
    "1.0",
    "3.0",
    "2.9999999999999996",
    "-1.5",
    "1000000.0",
    "0.000001",
];
const SIGNAL_VALUES: [f64; 12] = [
    0.0,
    -0.0,
    0.5,
    0.9,
    1.0,
    3.0,
    2.9999999999999996,
    1e-300,
    -2.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
];

/// Something a comparison or a boolean operator may take.
fn operand() -> impl Strategy<Value = String> {
    prop_oneof![
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(3),
            Just(-1),
            -20..20i64,
            any::<i32>().prop_map(i64::from)
        ]
        .prop_map(|i| i.to_string()),
        proptest::sample::select(&FLOATS[..]).prop_map(str::to_string),
        proptest::sample::select(&WORDS[..]).prop_map(|w| format!("{w:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        Just("()".to_string()),
        proptest::sample::select(
            &[
                "biz",
                "code",
                "attempt",
                "elapsed",
                "retry_after",
                "last_delay",
                "now",
                "redrives"
            ][..]
        )
        .prop_map(str::to_string),
        (
            proptest::sample::select(&["signals", "attrs", "headers"][..]),
            proptest::sample::select(&["fail_rate", "tenant", "missing"][..]),
            any::<bool>(),
        )
            .prop_map(|(map, key, dot)| if dot {
                format!("{map}.{key}")
            } else {
                format!("{map}[{key:?}]")
            }),
    ]
}

fn comparison() -> impl Strategy<Value = String> {
    (
        operand(),
        proptest::sample::select(&["==", "!=", "<", "<=", ">", ">="][..]),
        operand(),
    )
        .prop_map(|(a, op, b)| format!("{a} {op} {b}"))
}

/// A guard of the fast language; its leaves are mostly comparisons, sometimes a bare operand
/// (an error for `&&`, `||` and `!` unless it is a boolean).
fn guard() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![4 => comparison(), 1 => operand()];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            inner.prop_map(|a| format!("!({a})")),
        ]
    })
}

fn words_map() -> impl Strategy<Value = Attrs> {
    proptest::collection::btree_map(
        proptest::sample::select(&["tenant", "region"][..]).prop_map(str::to_string),
        proptest::sample::select(&WORDS[..]).prop_map(str::to_string),
        0..=2,
    )
}

#[derive(Debug, Clone)]
struct Failure {
    biz: &'static str,
    code: &'static str,
    attempt: u32,
    elapsed: u64,
    retry_after: Option<u64>,
    last_delay: u64,
    now: u64,
    redrives: u32,
    attrs: Attrs,
    headers: HeaderMap,
    signals: Signals,
    as_pairs: bool,
}

fn failure() -> impl Strategy<Value = Failure> {
    (
        (
            proptest::sample::select(&WORDS[..]),
            proptest::sample::select(&WORDS[..]),
            prop_oneof![0..12u32, Just(u32::MAX)],
            prop_oneof![0..5_000u64, Just(u64::MAX)],
            proptest::option::of(0..3u64),
            0..5u64,
            prop_oneof![Just(0u64), 0..10u64, Just(u64::MAX)],
        ),
        words_map(),
        words_map(),
        proptest::collection::btree_map(
            proptest::sample::select(&["fail_rate", "depth"][..]).prop_map(str::to_string),
            proptest::sample::select(&SIGNAL_VALUES[..]),
            0..=2,
        ),
        (any::<bool>(), prop_oneof![0..4u32, Just(u32::MAX)]),
    )
        .prop_map(
            |(
                (biz, code, attempt, elapsed, retry_after, last_delay, now),
                attrs,
                headers,
                signals,
                (as_pairs, redrives),
            )| {
                Failure {
                    biz,
                    code,
                    attempt,
                    elapsed,
                    retry_after,
                    last_delay,
                    now,
                    redrives,
                    attrs,
                    headers,
                    signals,
                    as_pairs,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Wherever the tree answers, rhai gives the same boolean; where it declines, rhai
    /// fails or yields something else, so a declined guard is never a slower correct one.
    #[test]
    fn fast_guards_agree_with_rhai(source in guard(), failures in proptest::collection::vec(failure(), 8)) {
        let e = ScriptEngine::new();
        // The parser itself refuses a literal that is no boolean under `&&`, `||` or `!`.
        let Ok(expr) = e.compile(&source) else {
            return Ok(());
        };
        let tree = expr.fast.clone().expect("every generated guard has a tree");
        for f in &failures {
            let pairs: Vec<(&'static str, f64)> = f
                .signals
                .iter()
                .map(|(k, v)| (if k == "fail_rate" { "fail_rate" } else { "depth" }, *v))
                .collect();
            let ctx = FailureContext {
                elapsed: Duration::from_millis(f.elapsed),
                retry_after: f.retry_after.map(Duration::from_millis),
                last_delay: Duration::from_millis(f.last_delay),
                attrs: &f.attrs,
                headers: &f.headers,
                now: f.now,
                redrives: f.redrives,
                signals: if f.as_pairs { SignalView::Pairs(&pairs) } else { SignalView::Map(&f.signals) },
                ..FailureContext::new(f.biz, f.code, f.attempt)
            };
            let by_rhai = e.eval(&expr, &ctx).map(|v| v.as_bool());
            match tree.guard(&ctx) {
                Some(b) => prop_assert_eq!(by_rhai.clone(), Ok(Ok(b)), "{} on {:?}", source, f),
                None => prop_assert!(!matches!(by_rhai, Ok(Ok(_))), "{} declined, rhai says {:?} on {:?}", source, by_rhai, f),
            }
            // The guard as a decision runs it: whichever path, the same answer as rhai's.
            let guarded = e.guard(&expr, &ctx);
            match by_rhai {
                Ok(Ok(b)) => prop_assert_eq!(guarded, Ok(b)),
                _ => prop_assert!(guarded.is_err()),
            }
        }
    }
}
