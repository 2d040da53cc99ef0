//! A driver for callgrind, whose instruction counts repeat on a noisy machine where timings
//! do not: `N` decisions of a one-rule set whose rule carries a guard (`decide`, the default)
//! or none (`noguard`). The cost of one decision is the difference between two runs divided
//! by the difference in `N`, which cancels the set's compilation:
//!
//! ```text
//! cargo bench --bench guard_callgrind --no-run
//! B=$(ls target/release/deps/guard_callgrind-* | grep -v '\.d$')
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $B 1000 decide 'GUARD'
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $B 11000 decide 'GUARD'
//! ```
//!
//! (`cargo bench` runs it too, as 1,000 decisions: it prints nothing.)

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::{FailureContext, PolicyHandle, SignalView, SourceFile};
use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let mode = args.next().unwrap_or_else(|| "decide".into());
    let guard = args
        .next()
        .unwrap_or_else(|| "signals.fail_rate > 0.5 && attempt < 10".into());
    let guard = match mode.as_str() {
        "noguard" => String::new(),
        _ => format!("    if: '{guard}'\n"),
    };
    let yaml = format!(
        "version: 1\nrules:\n  - id: guarded\n    match: {{ code: NET_TIMEOUT }}\n{guard}    give_up: true\n"
    );
    let set = rebound_engine::compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)])
        .expect("the guard compiles");
    let handle = PolicyHandle::new(set);
    let signals = [("fail_rate", 0.9)];
    let ctx = FailureContext {
        signals: SignalView::Pairs(&signals),
        ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
    };
    let mut rng = SmallRng::seed_from_u64(1);
    for _ in 0..n {
        black_box(handle.decide(black_box(&ctx), &mut rng));
    }
}
