//! Rebound against a peer: the same first-hit decision table of 10 to 10,000 rows, decided by
//! zen-engine (GoRules' JDM engine, a decision table node in a graph held by its in-memory
//! loader, compiled before the run) and by Rebound, in one run.
//!
//! A row is `biz == B{i % 50}`, `code == C{i}` and, on every third row, an attempt range
//! `[2..5]`; it answers a delay of `100 + i` ms. The failure decided is `B{h % 50}`, `C{h}`,
//! attempt 3, where `h` is the last row with a range: it sits at the end of the table, and
//! its range holds. Both engines are asserted to answer row `h` before anything is measured.
//!
//! zen-engine pulls a large tree (QuickJS, an HTTP client, a JSON Schema validator), so it is
//! an optional dependency behind the `peer-bench` feature, which only this bench requires:
//! `cargo test` and `cargo clippy --all-targets` never build it.
//!
//! Run: `cargo bench --bench peers --features peer-bench`
//! (the ratio of `peers/N_rows/zen` to `peers/N_rows/rebound` is the comparison).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::{Decision, FailureContext, PolicyHandle, RuleRef, SourceFile, compile};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use zen_engine::loader::MemoryLoader;
use zen_engine::model::DecisionContent;
use zen_engine::nodes::custom::NoopCustomNode;
use zen_engine::{DecisionEngine, Variable};

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];

/// Whether row `i` carries the attempt range `[2..5]`.
fn has_range(i: usize) -> bool {
    i.is_multiple_of(3)
}

/// The row the decided failure hits: the last one with a range.
fn hit(n: usize) -> usize {
    (0..n)
        .rev()
        .find(|&i| has_range(i))
        .expect("a row with a range")
}

/// The table as Rebound rules, one file.
fn rebound_rules(n: usize) -> PolicyHandle {
    let mut y = String::from("version: 1\nrules:\n");
    for i in 0..n {
        writeln!(y, "  - id: row-{i}").unwrap();
        let attempt = if has_range(i) {
            ", attempt: [\">= 2\", \"<= 5\"]"
        } else {
            ""
        };
        writeln!(y, "    match: {{ biz: B{}, code: C{i}{attempt} }}", i % 50).unwrap();
        writeln!(
            y,
            "    retry: {{ max_retries: 10, backoff: {{ fixed: {}ms }} }}",
            100 + i
        )
        .unwrap();
    }
    let set = compile(vec![SourceFile::new("table.yaml", "table.yaml", y)]).expect("compiles");
    PolicyHandle::new(set)
}

/// The same table as a JDM graph: input → first-hit decision table → output.
fn zen_graph(n: usize) -> DecisionContent {
    let rules: Vec<Value> = (0..n)
        .map(|i| {
            let attempt = if has_range(i) { "[2..5]" } else { "" };
            json!({
                "_id": format!("r{i}"),
                "biz": format!("\"B{}\"", i % 50),
                "code": format!("\"C{i}\""),
                "attempt": attempt,
                "delay": (100 + i).to_string(),
            })
        })
        .collect();
    serde_json::from_value(json!({
        "nodes": [
            { "id": "in", "name": "failure", "type": "inputNode", "content": {} },
            { "id": "table", "name": "retry", "type": "decisionTableNode", "content": {
                "hitPolicy": "first",
                "inputs": [
                    { "id": "biz", "name": "Biz", "field": "biz" },
                    { "id": "code", "name": "Code", "field": "code" },
                    { "id": "attempt", "name": "Attempt", "field": "attempt" }
                ],
                "outputs": [ { "id": "delay", "name": "Delay", "field": "delay" } ],
                "rules": rules
            } },
            { "id": "out", "name": "decision", "type": "outputNode", "content": {} }
        ],
        "edges": [
            { "id": "e1", "sourceId": "in", "targetId": "table" },
            { "id": "e2", "sourceId": "table", "targetId": "out" }
        ]
    }))
    .expect("a JDM graph")
}

/// Runs a future that never waits (zen's table evaluation does no I/O) to its end.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn peers(c: &mut Criterion) {
    for n in SIZES {
        let h = hit(n);
        let (biz, code) = (format!("B{}", h % 50), format!("C{h}"));

        let rebound = rebound_rules(n);
        let ctx = FailureContext::new(&biz, &code, 3);
        let mut rng = SmallRng::seed_from_u64(1);
        let row = format!("row-{h}");
        match rebound.decide(&ctx, &mut rng).decision {
            Decision::Retry {
                delay,
                rule: RuleRef::Rule(id),
            } => {
                assert_eq!(
                    (delay, id.as_str()),
                    (Duration::from_millis(100 + h as u64), row.as_str())
                );
            }
            other => panic!("Rebound decided {other:?}, expected row {h}"),
        }

        let loader = Arc::new(MemoryLoader::default());
        loader.add("retry.json", zen_graph(n));
        let engine = DecisionEngine::new(loader, Arc::new(NoopCustomNode));
        assert!(engine.compile().is_empty(), "the graph compiles");
        let mut decision = ready(engine.get_decision("retry.json"))
            .expect("loaded")
            .expect("a graph");
        decision.compile();
        let input: Variable = json!({ "biz": biz, "code": code, "attempt": 3 }).into();
        let answer = ready(decision.evaluate(input.clone())).expect("zen decides");
        let answer: Value = answer.result.into();
        assert_eq!(answer, json!({ "delay": 100 + h }), "zen answers row {h}");

        let mut group = c.benchmark_group(format!("peers/{n}_rows"));
        group
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(if n >= 1_000 { 3 } else { 1 }));
        group.bench_function(BenchmarkId::from_parameter("rebound"), |b| {
            b.iter(|| rebound.decide(black_box(&ctx), &mut rng))
        });
        group.bench_function(BenchmarkId::from_parameter("zen"), |b| {
            b.iter(|| ready(decision.evaluate(black_box(input.clone()))).expect("decides"))
        });
        group.finish();
    }
}

criterion_group!(benches, peers);
criterion_main!(benches);
