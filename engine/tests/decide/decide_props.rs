//! Property tests of the decision: the compiled index agrees with a naive first-match scan,
//! delays stay in the spec's ranges, and no input makes a decision panic.

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rebound_engine::{
    Attrs, Decision, FailureContext, HeaderMap, PolicyHandle, SignalView, Signals, SourceFile,
    compile,
};
use std::fmt::Write as _;
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// A generated rule set, its YAML, and a naive oracle written independently of the engine.

const NAMES: [&str; 6] = ["ORDER", "PAYMENT", "PAY", "INVENTORY", "X", ""];
const PATTERNS: [&str; 17] = [
    "ORDER",
    "PAYMENT",
    "PAY",
    "INVENTORY",
    "PAY*",
    "*ENT",
    "*",
    "P*T",
    "*A*",
    "X",
    "O*",
    "ORD*",
    "INVEN*",
    "IN*",
    "PAYM*",
    "*Y",
    "*ORY",
];
const OPS: [&str; 6] = ["<", "<=", ">", ">=", "==", "!="];

#[derive(Debug, Clone)]
struct GenRule {
    biz: Option<Vec<&'static str>>,
    code: Option<Vec<&'static str>>,
    attempt: Vec<(usize, u32)>,
    elapsed: Vec<(usize, u64)>,
    attr: Option<(&'static str, Vec<&'static str>)>,
    header: Option<(&'static str, Vec<&'static str>)>,
    give_up: bool,
    fixed_ms: u64,
}

fn names() -> impl Strategy<Value = Option<Vec<&'static str>>> {
    prop::option::weighted(
        0.7,
        prop::collection::vec(prop::sample::select(&PATTERNS[..]), 1..3),
    )
}

fn rule() -> impl Strategy<Value = GenRule> {
    (
        names(),
        names(),
        prop::collection::vec((0..6usize, 0..6u32), 0..2),
        prop::collection::vec((0..6usize, 0..5_000u64), 0..2),
        prop::option::weighted(
            0.2,
            (
                Just("tier"),
                prop::collection::vec(prop::sample::select(&["gold", "g*", "*"][..]), 1..2),
            ),
        ),
        prop::option::weighted(
            0.25,
            (
                Just("tenant"),
                prop::collection::vec(
                    prop::sample::select(&["vip", "vip-*", "*-eu", "*", "std"][..]),
                    1..3,
                ),
            ),
        ),
        any::<bool>(),
        0..10_000u64,
    )
        .prop_map(
            |(biz, code, attempt, elapsed, attr, header, give_up, fixed_ms)| GenRule {
                biz,
                code,
                attempt,
                elapsed,
                attr,
                header,
                give_up,
                fixed_ms,
            },
        )
}

fn yaml_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

fn render(rules: &[GenRule], offset: usize) -> String {
    let mut y = String::from("version: 1\nrules:\n");
    for (i, r) in rules.iter().enumerate() {
        writeln!(y, "  - id: r{}", offset + i).unwrap();
        y.push_str("    match:\n");
        if let Some(b) = &r.biz {
            writeln!(y, "      biz: {}", yaml_list(b)).unwrap();
        }
        if let Some(c) = &r.code {
            writeln!(y, "      code: {}", yaml_list(c)).unwrap();
        }
        if !r.attempt.is_empty() {
            let items: Vec<String> = r
                .attempt
                .iter()
                .map(|(op, n)| format!("{} {n}", OPS[*op]))
                .collect();
            writeln!(
                y,
                "      attempt: {}",
                yaml_list(&items.iter().map(String::as_str).collect::<Vec<_>>())
            )
            .unwrap();
        }
        if !r.elapsed.is_empty() {
            let items: Vec<String> = r
                .elapsed
                .iter()
                .map(|(op, n)| format!("{} {n}ms", OPS[*op]))
                .collect();
            writeln!(
                y,
                "      elapsed: {}",
                yaml_list(&items.iter().map(String::as_str).collect::<Vec<_>>())
            )
            .unwrap();
        }
        if let Some((k, v)) = &r.attr {
            writeln!(y, "      attrs: {{ {k}: {} }}", yaml_list(v)).unwrap();
        }
        if let Some((k, v)) = &r.header {
            writeln!(y, "      headers: {{ {k}: {} }}", yaml_list(v)).unwrap();
        }
        if r.give_up {
            y.push_str("    give_up: true\n");
        } else {
            writeln!(
                y,
                "    retry: {{ max_retries: 1000, backoff: {{ fixed: {} }} }}",
                r.fixed_ms
            )
            .unwrap();
        }
    }
    y
}

/// Glob matching by dynamic programming: deliberately not the engine's algorithm.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let mut dp = vec![vec![false; n.len() + 1]; p.len() + 1];
    dp[0][0] = true;
    for i in 1..=p.len() {
        dp[i][0] = dp[i - 1][0] && p[i - 1] == '*';
        for j in 1..=n.len() {
            dp[i][j] = if p[i - 1] == '*' {
                dp[i - 1][j] || dp[i][j - 1]
            } else {
                dp[i - 1][j - 1] && p[i - 1] == n[j - 1]
            };
        }
    }
    dp[p.len()][n.len()]
}

fn op_holds<T: Ord>(op: usize, l: T, r: T) -> bool {
    match OPS[op] {
        "<" => l < r,
        "<=" => l <= r,
        ">" => l > r,
        ">=" => l >= r,
        "==" => l == r,
        _ => l != r,
    }
}

/// One failure of the oracle test: biz, code, attempt, elapsed ms, attrs.tier, headers.tenant.
#[derive(Debug, Clone, Copy)]
struct GenFailure {
    biz: &'static str,
    code: &'static str,
    attempt: u32,
    elapsed: u64,
    tier: Option<&'static str>,
    tenant: Option<&'static str>,
}

fn oracle_matches(r: &GenRule, f: &GenFailure) -> bool {
    let GenFailure {
        biz,
        code,
        attempt,
        elapsed,
        tier,
        tenant,
    } = *f;
    let names_ok = |pats: &Option<Vec<&str>>, v: &str| {
        pats.as_ref()
            .is_none_or(|p| p.iter().any(|g| glob_matches(g, v)))
    };
    // An absent attribute or header never matches, not even `*`.
    let named_ok = |cond: &Option<(&str, Vec<&str>)>, v: Option<&str>| {
        cond.as_ref()
            .is_none_or(|(_, pats)| v.is_some_and(|v| pats.iter().any(|g| glob_matches(g, v))))
    };
    names_ok(&r.biz, biz)
        && names_ok(&r.code, code)
        && r.attempt.iter().all(|(op, n)| op_holds(*op, attempt, *n))
        && r.elapsed.iter().all(|(op, n)| op_holds(*op, elapsed, *n))
        && named_ok(&r.attr, tier)
        && named_ok(&r.header, tenant)
}

fn build(files: &[Vec<GenRule>]) -> PolicyHandle {
    let mut offset = 0;
    let sources = files
        .iter()
        .enumerate()
        .map(|(i, rules)| {
            let text = render(rules, offset);
            offset += rules.len();
            SourceFile::new(format!("{i:02}.yaml"), format!("{i:02}.yaml"), text)
        })
        .collect();
    PolicyHandle::new(compile(sources).unwrap_or_else(|e| panic!("generated set must load: {e}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn compiled_set_agrees_with_naive_first_match_scan(
        files in prop::collection::vec(prop::collection::vec(rule(), 0..12), 1..4),
        contexts in prop::collection::vec(
            (prop::sample::select(&NAMES[..]), prop::sample::select(&NAMES[..]), 1..8u32, 0..6_000u64,
             prop::option::of(prop::sample::select(&["gold", "green", "silver"][..])),
             prop::option::of(prop::sample::select(&["vip", "vip-eu", "std", "acme-eu"][..])), any::<u64>()),
            1..24),
    ) {
        let handle = build(&files);
        let all: Vec<&GenRule> = files.iter().flatten().collect();
        for (biz, code, attempt, elapsed, tier, tenant, seed) in contexts {
            let f = GenFailure { biz, code, attempt, elapsed, tier, tenant };
            let attrs: Attrs = tier.map(|t| ("tier".to_string(), t.to_string())).into_iter().collect();
            let headers: HeaderMap =
                tenant.map(|t| ("tenant".to_string(), t.to_string())).into_iter().collect();
            let ctx = FailureContext {
                elapsed: Duration::from_millis(elapsed),
                attrs: &attrs,
                headers: &headers,
                ..FailureContext::new(biz, code, attempt)
            };
            let fast = handle.decide(&ctx, &mut StdRng::seed_from_u64(seed));
            let scan = handle.decide_by_scan(&ctx, &mut StdRng::seed_from_u64(seed));
            prop_assert_eq!(&fast, &scan);
            let expected = all
                .iter()
                .position(|r| oracle_matches(r, &f))
                .map_or("defaults".to_string(), |i| format!("r{i}"));
            prop_assert_eq!(fast.decision.rule().as_str(), expected.as_str());
            if let Some(i) = all.iter().position(|r| oracle_matches(r, &f)) {
                let r = all[i];
                match &fast.decision {
                    Decision::DeadLetter { reason, .. } => prop_assert!(r.give_up && reason.as_str() == "give_up"),
                    Decision::Retry { delay, .. } => prop_assert_eq!(*delay, Duration::from_millis(r.fixed_ms)),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Delays stay in the spec's ranges for every backoff and jitter kind.

#[derive(Debug, Clone)]
enum Kind {
    Fixed(u64),
    Linear {
        base: u64,
        step: u64,
        max: Option<u64>,
    },
    Exponential {
        base: u64,
        factor: f64,
        max: Option<u64>,
    },
    Schedule(Vec<u64>),
}

#[derive(Debug, Clone, Copy)]
enum Jit {
    None,
    Full,
    Equal,
    Decorrelated,
    Percent(u32),
    Add(u64),
}

fn kind() -> impl Strategy<Value = Kind> {
    let big = prop_oneof![0..10_000u64, 0..u64::MAX / 2];
    let max = prop::option::of(1..600_000u64);
    prop_oneof![
        prop_oneof![0..3u64, 0..1_000_000u64].prop_map(Kind::Fixed),
        (big.clone(), big, max.clone()).prop_map(|(base, step, max)| Kind::Linear {
            base,
            step,
            max
        }),
        (
            0..100_000u64,
            prop_oneof![Just(2.0), 1.0..10.0f64, 0.1..1.0f64],
            max
        )
            .prop_map(|(base, factor, max)| Kind::Exponential { base, factor, max }),
        prop::collection::vec(0..1_000_000u64, 1..6).prop_map(Kind::Schedule),
    ]
}

fn jit() -> impl Strategy<Value = Jit> {
    prop_oneof![
        Just(Jit::None),
        Just(Jit::Full),
        Just(Jit::Equal),
        Just(Jit::Decorrelated),
        (0..=100u32).prop_map(Jit::Percent),
        (0..100_000u64).prop_map(Jit::Add),
    ]
}

fn backoff_yaml(k: &Kind, j: Jit) -> String {
    let kind = match k {
        Kind::Fixed(d) => format!("fixed: {d}"),
        Kind::Linear { base, step, max } => format!(
            "linear: {{ base: {base}, step: {step}{} }}",
            max.map(|m| format!(", max: {m}")).unwrap_or_default()
        ),
        Kind::Exponential { base, factor, max } => format!(
            "exponential: {{ base: {base}, factor: {factor}{} }}",
            max.map(|m| format!(", max: {m}")).unwrap_or_default()
        ),
        Kind::Schedule(s) => format!(
            "schedule: [{}]",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let jitter = match j {
        Jit::None => "none".to_string(),
        Jit::Full => "full".into(),
        Jit::Equal => "equal".into(),
        Jit::Decorrelated => "decorrelated".into(),
        Jit::Percent(p) => format!("\"{p}%\""),
        Jit::Add(ms) => format!("\"{ms}ms\""),
    };
    format!("{{ {kind}, jitter: {jitter} }}")
}

const DAY: u128 = 86_400_000;

/// The spec's range for retry `r`, computed independently in u128/f64.
fn expected_range(k: &Kind, j: Jit, r: u32, last: u64) -> (u128, u128) {
    let steps = u128::from(r.max(1) - 1);
    let sat =
        |v: Option<u128>, max: Option<u64>| match (v.filter(|v| *v <= u128::from(u64::MAX)), max) {
            (Some(v), Some(_)) => v,
            (None, Some(m)) => u128::from(m),
            (Some(v), None) => v.min(DAY),
            (None, None) => DAY,
        };
    let (d, base, max) = match k {
        Kind::Fixed(d) => (u128::from(*d), u128::from(*d), None),
        Kind::Linear { base, step, max } => {
            let v = u128::from(*step)
                .checked_mul(steps)
                .map(|s| s + u128::from(*base));
            (sat(v, *max), u128::from(*base), *max)
        }
        Kind::Exponential { base, factor, max } => {
            let v = *base as f64 * factor.powf(steps as f64);
            let v = (v.is_finite() && v < u64::MAX as f64).then_some(v as u128);
            (sat(v, *max), u128::from(*base), *max)
        }
        Kind::Schedule(s) => {
            let e = u128::from(
                s[usize::try_from(steps)
                    .unwrap_or(usize::MAX)
                    .min(s.len() - 1)],
            );
            (e, e, None)
        }
    };
    let (lo, hi) = match j {
        Jit::None => (d, d),
        Jit::Full => (0, d),
        Jit::Equal => (d / 2, d),
        Jit::Decorrelated => {
            let last = if last == 0 { base } else { u128::from(last) };
            (base, base.max(3 * last))
        }
        Jit::Percent(p) => (
            d * u128::from(100 - p) / 100,
            d * u128::from(100 + p) / 100 + 1,
        ),
        Jit::Add(a) => (d, d + u128::from(a)),
    };
    match max {
        Some(m) => (lo.min(u128::from(m)), hi.min(u128::from(m))),
        None => (lo, hi),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn delays_stay_in_the_spec_range_and_saturate(
        k in kind(),
        j in jit(),
        r in prop_oneof![1..20u32, Just(u32::MAX), 1..u32::MAX],
        last in prop_oneof![Just(0u64), 0..1_000_000u64, Just(u64::MAX / 4)],
        seed in any::<u64>(),
    ) {
        let yaml = format!(
            "version: 1\nrules:\n  - id: r\n    retry: {{ max_retries: 4294967295, respect_retry_after: false, backoff: {} }}\n",
            backoff_yaml(&k, j)
        );
        let handle = PolicyHandle::new(compile(vec![SourceFile::new("r.yaml", "r.yaml", yaml)]).unwrap());
        let ctx = FailureContext { last_delay: Duration::from_millis(last), ..FailureContext::new("B", "C", r) };
        let decided = handle.decide(&ctx, &mut StdRng::seed_from_u64(seed));
        let Decision::Retry { delay, .. } = decided.decision else {
            return Err(TestCaseError::fail("expected a retry"));
        };
        let (lo, hi) = expected_range(&k, j, r, last);
        let got = delay.as_millis();
        // Exponential goes through floating point: allow one millisecond either way.
        let slack = u128::from(matches!(k, Kind::Exponential { .. }));
        prop_assert!(got + slack >= lo && got <= hi + slack, "delay {got} not in [{lo}, {hi}] for {k:?} {j:?} r={r}");
    }

    #[test]
    fn retry_after_and_max_elapsed_follow_steps_five_and_six(
        fixed in 0..100_000u64,
        retry_after in prop::option::of(0..200_000u64),
        respect in any::<bool>(),
        max_elapsed in prop::option::of(0..300_000u64),
        elapsed in 0..400_000u64,
    ) {
        let mut yaml = format!(
            "version: 1\nrules:\n  - id: r\n    retry:\n      respect_retry_after: {respect}\n      backoff: {{ fixed: {fixed} }}\n"
        );
        if let Some(m) = max_elapsed {
            writeln!(yaml, "      max_elapsed: {m}").unwrap();
        }
        let handle = PolicyHandle::new(compile(vec![SourceFile::new("r.yaml", "r.yaml", yaml)]).unwrap());
        let ctx = FailureContext {
            elapsed: Duration::from_millis(elapsed),
            retry_after: retry_after.map(Duration::from_millis),
            ..FailureContext::new("B", "C", 1)
        };
        let decided = handle.decide(&ctx, &mut StdRng::seed_from_u64(0));
        let d = if respect { fixed.max(retry_after.unwrap_or(0)) } else { fixed };
        match (max_elapsed, decided.decision) {
            (Some(m), Decision::DeadLetter { reason, .. }) => {
                prop_assert!(elapsed + d > m);
                prop_assert_eq!(reason.as_str(), "max_elapsed");
            }
            (_, Decision::Retry { delay, .. }) => {
                prop_assert_eq!(delay, Duration::from_millis(d));
                prop_assert!(max_elapsed.is_none_or(|m| elapsed + d <= m));
            }
            (None, other) => return Err(TestCaseError::fail(format!("unexpected {other:?}"))),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `explain` records the arithmetic without changing the decision: under the same seed
    /// it decides what `decide` decides, and its numbers add up to that delay.
    #[test]
    fn explain_decides_as_decide_does_and_its_arithmetic_adds_up(
        k in kind(),
        j in jit(),
        r in prop_oneof![1..20u32, 1..u32::MAX],
        last in prop_oneof![Just(0u64), 0..1_000_000u64],
        retry_after in prop::option::of(0..200_000u64),
        max_elapsed in prop::option::of(0..300_000u64),
        elapsed in 0..400_000u64,
        seed in any::<u64>(),
    ) {
        let mut yaml = format!(
            "version: 1\nrules:\n  - id: r\n    retry:\n      max_retries: 10\n      backoff: {}\n",
            backoff_yaml(&k, j)
        );
        if let Some(m) = max_elapsed {
            writeln!(yaml, "      max_elapsed: {m}").unwrap();
        }
        let handle = PolicyHandle::new(compile(vec![SourceFile::new("r.yaml", "r.yaml", yaml)]).unwrap());
        let ctx = FailureContext {
            elapsed: Duration::from_millis(elapsed),
            retry_after: retry_after.map(Duration::from_millis),
            last_delay: Duration::from_millis(last),
            ..FailureContext::new("B", "C", r)
        };
        let decided = handle.decide(&ctx, &mut StdRng::seed_from_u64(seed));
        let explained = handle.explain(&ctx, &mut StdRng::seed_from_u64(seed));
        prop_assert_eq!(&explained.decided.decision, &decided.decision);
        let p = explained.pacing.expect("a retry rule explains its pacing");
        prop_assert_eq!((p.retry, p.max_retries), (r, 10));
        if r > 10 {
            prop_assert_eq!(p.stopped, Some("max_retries"));
            prop_assert!(p.drawn_ms.is_none());
            return Ok(());
        }
        let (lo, hi) = p.jitter_range_ms.unwrap();
        let drawn = p.drawn_ms.unwrap();
        prop_assert!(lo <= drawn && drawn <= hi.max(lo));
        let clamped = p.clamped_ms.unwrap();
        prop_assert_eq!(clamped, p.max_ms.map_or(drawn, |m| drawn.min(m)));
        let delay = p.delay_ms.unwrap();
        prop_assert_eq!(delay, clamped.max(retry_after.unwrap_or(0)));
        match decided.decision {
            Decision::Retry { delay: d, .. } => {
                prop_assert_eq!(d, Duration::from_millis(delay));
                prop_assert!(p.stopped.is_none());
            }
            Decision::DeadLetter { reason, .. } => {
                prop_assert_eq!(reason.as_str(), "max_elapsed");
                prop_assert_eq!(p.stopped, Some("max_elapsed"));
                prop_assert!(elapsed + delay > max_elapsed.unwrap());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// No input makes a decision panic.

fn shipped_and_scripted() -> Vec<PolicyHandle> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        "../rules",
        "tests/fixtures/scripted",
        "tests/fixtures/runaway-guards",
    ]
    .iter()
    .map(|d| PolicyHandle::new(rebound_engine::load_dir(&root.join(d)).unwrap().unwrap()))
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn decide_never_panics_on_arbitrary_contexts(
        biz in prop_oneof![Just(String::new()), prop::sample::select(&NAMES[..]).prop_map(String::from), ".*"],
        code in prop_oneof![Just(String::new()), Just("NET_TIMEOUT".to_string()), Just("DB_LOCK_WAIT".to_string()), ".*"],
        attempt in prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>(), 1..10u32],
        redrives in prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>(), 0..4u32],
        elapsed in prop_oneof![Just(u64::MAX), any::<u64>(), 0..10_000_000u64],
        retry_after in prop::option::of(prop_oneof![Just(u64::MAX), any::<u64>()]),
        last_delay in prop_oneof![Just(u64::MAX), any::<u64>(), 0..100_000u64],
        attrs in prop::collection::btree_map(prop_oneof![Just("region".to_string()), Just("tier".to_string()), ".*"], ".*", 0..3),
        headers in prop::collection::btree_map(prop_oneof![Just("tenant".to_string()), ".*"], ".*", 0..3),
        now in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
        fail_rate in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), any::<f64>(), 0.0..1.0f64],
        seed in any::<u64>(),
    ) {
        let signals: Signals = [("fail_rate".to_string(), fail_rate)].into();
        let ctx = FailureContext {
            biz: &biz,
            code: &code,
            attempt,
            redrives,
            elapsed: Duration::from_millis(elapsed),
            retry_after: retry_after.map(Duration::from_millis),
            last_delay: Duration::from_millis(last_delay),
            attrs: &attrs,
            headers: &headers,
            now,
            signals: SignalView::Map(&signals),
        };
        for handle in shipped_and_scripted() {
            let mut rng = StdRng::seed_from_u64(seed);
            let _ = handle.decide(&ctx, &mut rng);
            let _ = handle.explain(&ctx, &mut rng);
        }
    }
}
