//! Decision speed: the compiled index against a linear first-match scan, in the same run,
//! on sets of 10 to 10,000 rules, for failures that hit an exact rule, a glob rule, the
//! defaults, and a rule with a rhai guard. A plain `HashMap<String, _>` lookup is the floor
//! the compiled decision is compared with, and compiling a 10,000-rule set is timed too.
//!
//! `decide/adaptive_sections` decides the same failures on the same rules with and without
//! `heat:`, `budgets:` and `breakers:` sections (3 budgets, 3 breakers, 5 heat weights): the
//! sections must not slow the decision down.
//!
//! `decide/guard` isolates a decision whose deciding rule carries a rhai `if:` guard:
//! - `decision`: the guard `signals.fail_rate > 0.5 && attempt < 10` (plain comparisons: the
//!   engine decides it without running rhai, see `engine/src/script/fast.rs`);
//! - `decision_in_rhai`: a guard that needs rhai (`signals.fail_rate * 2.0 > 1.0 && …`);
//! - `no_guard`: the same rule without its guard;
//! - `bare_eval`: rhai alone evaluating the plain guard over a scope built once (a stock
//!   engine, the signals a plain map): what the guard costs rhai itself;
//! - `rebuilt_scope`: the same, with the scope of all ten variables built afresh for each
//!   evaluation, as the engine did before (the floor of the old decision).
//!
//! Target: `decision` ≤ 500 ns.
//!
//! Run: `cargo bench --bench decide`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::{Attrs, FailureContext, PolicyHandle, SignalView, SourceFile, compile};
use rhai::{Dynamic, Engine, ImmutableString, Map, Scope};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

/// A set of `n` rules shaped like a real one: mostly exact biz/code rules, some globs and
/// attempt comparisons, one guarded rule, split over ten files.
fn rule_set(n: usize) -> Vec<SourceFile> {
    let per_file = n.div_ceil(10);
    let mut files = Vec::new();
    for f in 0..10 {
        let mut y = String::from("version: 1\nrules:\n");
        for i in f * per_file..((f + 1) * per_file).min(n) {
            writeln!(y, "  - id: rule-{i}").unwrap();
            match i % 10 {
                0 | 1 => writeln!(y, "    match: {{ code: \"G{i}_*\" }}").unwrap(),
                2 => writeln!(
                    y,
                    "    match: {{ biz: B{}, code: C{i}, attempt: \">= 2\" }}",
                    i % 50
                )
                .unwrap(),
                _ => writeln!(y, "    match: {{ biz: B{}, code: C{i} }}", i % 50).unwrap(),
            }
            if i == guarded(n) {
                writeln!(y, "    if: '{GUARD}'").unwrap();
            }
            writeln!(
                y,
                "    retry: {{ max_retries: 5, backoff: {{ exponential: {{ base: 100ms, max: 30s }}, jitter: equal }} }}"
            )
            .unwrap();
        }
        files.push(SourceFile::new(
            format!("{f:02}.yaml"),
            format!("{f:02}.yaml"),
            y,
        ));
    }
    files
}

/// The rule that carries a guard: the first exact rule three quarters of the way down.
fn guarded(n: usize) -> usize {
    (n * 3 / 4..n).find(|i| i % 10 >= 3).expect("an exact rule")
}

/// Failures that hit an exact rule, a glob rule, the defaults and the guarded rule, about
/// three quarters of the way down the set.
fn contexts(n: usize) -> [(&'static str, String, String); 4] {
    let guard = guarded(n);
    let exact = (guard + 1..n).find(|i| i % 10 >= 3).expect("an exact rule");
    let glob = (0..=n * 3 / 4)
        .rev()
        .find(|i| i % 10 == 0)
        .expect("a glob rule");
    [
        ("exact", format!("B{}", exact % 50), format!("C{exact}")),
        ("glob", "B1".to_string(), format!("G{glob}_TIMEOUT")),
        ("defaults", "B1".to_string(), "NOTHING_MATCHES".to_string()),
        ("guard", format!("B{}", guard % 50), format!("C{guard}")),
    ]
}

fn decide(c: &mut Criterion) {
    // The runtime hands its signals over as pairs on its stack, so the bench does too.
    let signals = [("fail_rate", 0.9)];
    for n in [10usize, 100, 1_000, 10_000] {
        let handle = PolicyHandle::new(compile(rule_set(n)).expect("bench set compiles"));
        let mut group = c.benchmark_group(format!("decide/{n}_rules"));
        group
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for (case, biz, code) in contexts(n) {
            let ctx = FailureContext {
                signals: SignalView::Pairs(&signals),
                ..FailureContext::new(&biz, &code, 1)
            };
            // The runtime draws jitter from a `SmallRng`, so the bench does too.
            let mut rng = SmallRng::seed_from_u64(1);
            group.bench_function(BenchmarkId::new("compiled", case), |b| {
                b.iter(|| handle.decide(black_box(&ctx), &mut rng))
            });
            if n <= 1_000 || case == "exact" {
                group.bench_function(BenchmarkId::new("linear_scan", case), |b| {
                    b.iter(|| handle.decide_by_scan(black_box(&ctx), &mut rng))
                });
            }
        }
        group.finish();
    }

    let map: HashMap<String, u32> = (0..1_000).map(|i| (format!("C{i}"), i)).collect();
    let key = "C757".to_string();
    c.bench_function("baseline/hashmap_string_lookup", |b| {
        b.iter(|| map.get(black_box(key.as_str())))
    });
}

fn compile_time(c: &mut Criterion) {
    let files = rule_set(10_000);
    let mut group = c.benchmark_group("compile");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("10000_rules", |b| {
        b.iter(|| compile(black_box(files.clone())).unwrap())
    });
    group.finish();
}

/// The adaptive sections of the "with" set: a heat table of 5 weights, 3 budgets and 3
/// breakers, in scope of the failures decided (`B1`, `B7` and the glob codes).
const ADAPTIVE: &str = r#"version: 1
heat:
  half_life: 30s
  weights:
    - { code: "NET_*", weight: 3 }
    - { code: TIMEOUT, weight: 3 }
    - { code: "DB_*", weight: 2 }
    - { code: "G*_TIMEOUT", weight: 2 }
    - { code: "C7*", weight: 1 }
budgets:
  - id: b7-retries
    match: { biz: B7 }
    ratio: 50%
    min_per_s: 5
    window: 10s
    exhausted: hold
  - id: timeout-retries
    match: { code: "G*_TIMEOUT" }
    ratio: 20%
    window: 10s
  - id: everything-else
    ratio: 80%
    min_per_s: 10
    exhausted: dead_letter
breakers:
  - id: b1-gateway
    match: { biz: B1, code: ["G*_TIMEOUT", NOTHING_MATCHES] }
    per: attrs.downstream
    open_at: 75%
    min_samples: 50
    window: 10s
    cool_down: 30s
    ramp: 1m
  - id: b7-store
    match: { biz: B7 }
    open_at: 50%
    cool_down: 10s
  - id: by-code
    match: { code: "C*" }
    per: code
    open_at: 90%
    cool_down: 5s
    ramp: 30s
"#;

/// The same set deciding the same failures, with and without the adaptive sections (the
/// "without" set has the same file, holding only `version: 1`).
fn adaptive_sections(c: &mut Criterion) {
    let n = 100;
    let signals = [("fail_rate", 0.9)];
    let variants = [("without", "version: 1\n"), ("with", ADAPTIVE)];
    let failures = contexts(n);
    let downstream: Attrs = [("downstream".to_string(), "gw".to_string())].into();
    let mut group = c.benchmark_group("decide/adaptive_sections");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (id, extra) in variants {
        let mut files = rule_set(n);
        files.push(SourceFile::new(
            "60-adaptive.yaml",
            "60-adaptive.yaml",
            extra,
        ));
        let set = compile(files).expect("bench set compiles");
        assert_eq!(
            (set.budgets().len(), set.breakers().len()),
            if id == "with" { (3, 3) } else { (0, 0) },
        );
        let handle = PolicyHandle::new(set);
        let ctxs: Vec<FailureContext<'_>> = failures
            .iter()
            .map(|(_, biz, code)| FailureContext {
                signals: SignalView::Pairs(&signals),
                attrs: &downstream,
                ..FailureContext::new(biz, code, 1)
            })
            .collect();
        let mut rng = SmallRng::seed_from_u64(1);
        group.bench_function(id, |b| {
            b.iter(|| {
                for ctx in &ctxs {
                    black_box(handle.decide(black_box(ctx), &mut rng));
                }
            })
        });
    }
    group.finish();
}

/// The guard of the guarded rules, here and in [`rule_set`].
const GUARD: &str = "signals.fail_rate > 0.5 && attempt < 10";

/// A guard outside the language the engine decides without rhai (arithmetic).
const RHAI_GUARD: &str = "signals.fail_rate * 2.0 > 1.0 && attempt < 10";

/// The ten variables of rules.md in a new scope, built as the engine built one per
/// evaluation before it kept one per thread (signals here a plain map).
fn full_scope(ctx: &FailureContext<'_>) -> Scope<'static> {
    let strings = |m: &Attrs| -> Map {
        m.iter()
            .map(|(k, v)| {
                (
                    k.as_str().into(),
                    Dynamic::from(ImmutableString::from(v.as_str())),
                )
            })
            .collect()
    };
    let mut scope = Scope::new();
    scope.push("biz", ImmutableString::from(ctx.biz));
    scope.push("code", ImmutableString::from(ctx.code));
    scope.push("attempt", i64::from(ctx.attempt));
    scope.push("elapsed", ctx.elapsed.as_millis() as i64);
    scope.push_dynamic("retry_after", Dynamic::UNIT);
    scope.push("last_delay", ctx.last_delay.as_millis() as i64);
    scope.push("attrs", strings(ctx.attrs));
    scope.push("headers", strings(ctx.headers));
    scope.push("now", ctx.now as i64);
    let signals: Map = ctx
        .signals
        .iter()
        .map(|(k, v)| (k.into(), Dynamic::from(v)))
        .collect();
    scope.push("signals", signals);
    scope
}

/// A one-rule set deciding `NET_TIMEOUT` failures, behind `guard` when there is one.
fn one_rule(guard: Option<&str>) -> PolicyHandle {
    let guard = guard
        .map(|g| format!("    if: '{g}'\n"))
        .unwrap_or_default();
    let yaml = format!(
        "version: 1\nrules:\n  - id: guarded\n    match: {{ code: NET_TIMEOUT }}\n{guard}    retry: {{ max_retries: 5, backoff: {{ fixed: 1s }} }}\n"
    );
    PolicyHandle::new(compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).expect("compiles"))
}

fn guard(c: &mut Criterion) {
    let signals = [("fail_rate", 0.9)];
    let ctx = FailureContext {
        signals: SignalView::Pairs(&signals),
        ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
    };
    let mut rng = SmallRng::seed_from_u64(1);
    let mut group = c.benchmark_group("decide/guard");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let (guarded, unguarded) = (one_rule(Some(GUARD)), one_rule(None));
    let in_rhai = one_rule(Some(RHAI_GUARD));
    // All three decide by the rule: the guards hold.
    let by_rule = unguarded.decide(&ctx, &mut rng).decision;
    assert_eq!(guarded.decide(&ctx, &mut rng).decision, by_rule);
    assert_eq!(in_rhai.decide(&ctx, &mut rng).decision, by_rule);
    group.bench_function("decision", |b| {
        b.iter(|| guarded.decide(black_box(&ctx), &mut rng))
    });
    group.bench_function("decision_in_rhai", |b| {
        b.iter(|| in_rhai.decide(black_box(&ctx), &mut rng))
    });
    group.bench_function("no_guard", |b| {
        b.iter(|| unguarded.decide(black_box(&ctx), &mut rng))
    });
    let engine = Engine::new();
    let mut scope = Scope::new();
    scope.push("attempt", 3_i64);
    scope.push(
        "signals",
        Map::from([("fail_rate".into(), Dynamic::from(0.9))]),
    );
    let ast = engine
        .compile_expression_with_scope(&scope, GUARD)
        .expect("compiles");
    assert!(
        engine
            .eval_ast_with_scope::<bool>(&mut scope, &ast)
            .expect("runs")
    );
    group.bench_function("bare_eval", |b| {
        b.iter(|| engine.eval_ast_with_scope::<bool>(&mut scope, black_box(&ast)))
    });
    group.bench_function("rebuilt_scope", |b| {
        b.iter(|| {
            let mut scope = full_scope(black_box(&ctx));
            engine.eval_ast_with_scope::<bool>(&mut scope, &ast)
        })
    });
    group.finish();
}

criterion_group!(benches, decide, guard, adaptive_sections, compile_time);
criterion_main!(benches);
