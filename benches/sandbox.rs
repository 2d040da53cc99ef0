//! What the sandbox costs a guard: a decision whose only candidate rule carries the guard
//! (pure packages, every call checked at load, every operation counted and the wall clock
//! looked at every 32 of them) against a stock `rhai::Engine::new()` evaluating the same
//! expression over the same variables, in the same run. The ratio is the sandbox's price.
//! The same decision by the rule without its guard is measured too (`decision/no_guard`):
//! it is the part of the sandbox row that is not the guard.
//!
//! Run: `cargo bench --bench sandbox`

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::{Attrs, FailureContext, PolicyHandle, SignalView, Signals, SourceFile};
use rhai::{Dynamic, Engine, ImmutableString, Map, Scope};
use std::hint::black_box;

const GUARDS: [(&str, &str); 2] = [
    ("short", "signals.fail_rate > 0.5 && attempt < 10"),
    (
        "loop",
        "[1, 2, 3, 4, 5, 6, 7, 8].map(|x| x * attempt).reduce(|s, x| s + x, 0) > 100",
    ),
];

/// A set whose one rule decides `NET_TIMEOUT` by giving up, behind `guard` if there is one.
fn handle(guard: Option<&str>) -> PolicyHandle {
    let guard = guard
        .map(|g| format!("    if: '{g}'\n"))
        .unwrap_or_default();
    let yaml = format!(
        "version: 1\nrules:\n  - id: guarded\n    match: {{ code: NET_TIMEOUT }}\n{guard}    give_up: true\n"
    );
    let set = rebound_engine::compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)])
        .expect("compiles in the sandbox");
    PolicyHandle::new(set)
}

fn stock_scope(signals: &Signals) -> Scope<'static> {
    let mut scope = Scope::new();
    scope.push("biz", ImmutableString::from("PAYMENT"));
    scope.push("code", ImmutableString::from("NET_TIMEOUT"));
    scope.push("attempt", 3_i64);
    scope.push("elapsed", 0_i64);
    scope.push_dynamic("retry_after", Dynamic::UNIT);
    scope.push("last_delay", 0_i64);
    scope.push("attrs", Map::new());
    let map: Map = signals
        .iter()
        .map(|(k, v)| (k.as_str().into(), Dynamic::from(*v)))
        .collect();
    scope.push("signals", map);
    scope
}

fn guards(c: &mut Criterion) {
    let attrs = Attrs::new();
    let signals: Signals = [("fail_rate".to_string(), 0.9)].into();
    let ctx = FailureContext {
        attrs: &attrs,
        signals: SignalView::Map(&signals),
        ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
    };
    let mut rng = SmallRng::seed_from_u64(1);
    let mut stock = Engine::new();
    stock.set_max_operations(100_000);
    let unguarded = handle(None);
    c.bench_function("decision/no_guard", |b| {
        b.iter(|| black_box(unguarded.decide(black_box(&ctx), &mut rng)))
    });
    for (name, source) in GUARDS {
        let mut group = c.benchmark_group(format!("guard/{name}"));
        let guarded = handle(Some(source));
        group.bench_function("sandbox", |b| {
            b.iter(|| black_box(guarded.decide(black_box(&ctx), &mut rng)))
        });
        let ast = stock
            .compile_expression_with_scope(&stock_scope(&signals), source)
            .expect("compiles");
        group.bench_function("stock_rhai", |b| {
            b.iter(|| {
                let mut scope = stock_scope(black_box(&signals));
                black_box(stock.eval_ast_with_scope::<bool>(&mut scope, &ast))
            })
        });
        group.finish();
    }
}

criterion_group!(benches, guards);
criterion_main!(benches);
