//! What the sandbox costs a guard: `ScriptEngine::guard` (pure packages, every call checked at
//! load, every operation counted and the wall clock looked at every 32 of them) against a
//! stock `rhai::Engine::new()` evaluating the same expression over the same variables, in the
//! same run. The ratio is the sandbox's price.
//!
//! Run: `cargo bench --bench sandbox`

use criterion::{Criterion, criterion_group, criterion_main};
use rebound_engine::script::ScriptEngine;
use rebound_engine::{Attrs, FailureContext, SignalView, Signals};
use rhai::{Dynamic, Engine, ImmutableString, Map, Scope};
use std::hint::black_box;

const GUARDS: [(&str, &str); 2] = [
    ("short", "signals.fail_rate > 0.5 && attempt < 10"),
    (
        "loop",
        "[1, 2, 3, 4, 5, 6, 7, 8].map(|x| x * attempt).reduce(|s, x| s + x, 0) > 100",
    ),
];

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
    let sandbox = ScriptEngine::new();
    let mut stock = Engine::new();
    stock.set_max_operations(100_000);
    for (name, source) in GUARDS {
        let mut group = c.benchmark_group(format!("guard/{name}"));
        let expr = sandbox.compile(source).expect("compiles in the sandbox");
        group.bench_function("sandbox", |b| {
            b.iter(|| black_box(sandbox.guard(&expr, black_box(&ctx))))
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
