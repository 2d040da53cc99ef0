//! What releasing safely costs a decision (`docs/spec/release.md`): one failure decided by
//! `RulePolicy` (the rules' decision with its jitter drawn from the message's seed) alone,
//! with the decision log on (every decision recorded), and with a shadow set installed (both
//! sets decide, compared). The baseline is the engine's decision alone on a reused RNG, as
//! the policy decided before the seeds. Printed at the end as ratios (target: a shadow ≤ 2×
//! the decision without).
//!
//! `cargo bench -p rebound-runtime --bench release`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::{CompiledSet, FailureContext, PolicyHandle, SignalView, SourceFile, compile};
use rebound_runtime::fate::FailurePolicy;
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::release::{LogOptions, Release};
use rebound_runtime::topology::Message;

const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 5, backoff: { exponential: { base: 1s, max: 1m }, jitter: full } }
  dead_letter: L2
rules:
  - id: bad
    match: { code: BAD_JSON }
    give_up: true
    dead_letter: L3
  - id: lock
    match: { biz: ORDER, code: DB_LOCK }
    retry: { max_retries: 5, backoff: { fixed: 100ms, jitter: equal } }
    dead_letter: L2
  - id: pay
    match: { biz: PAYMENT, code: PAY_PROCESSING }
    retry: { max_retries: 8, backoff: { exponential: { base: 500ms, max: 30s }, jitter: full } }
    dead_letter: L1
";

fn set(yaml: &str) -> CompiledSet {
    compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).expect("the bench's rules")
}

/// Decides `n` failures of distinct messages with `p`, and the time per decision.
fn per_decision(p: &RulePolicy, messages: &[Message], signals: &[(&'static str, f64)]) -> Duration {
    let start = Instant::now();
    for m in messages {
        let mut ctx = FailureContext::new(&m.biz, "PAY_PROCESSING", 2);
        ctx.signals = SignalView::Pairs(signals);
        ctx.now = 1_700_000_000_000;
        black_box(p.decide(&ctx, m));
    }
    start.elapsed() / messages.len() as u32
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let messages: Vec<Message> = (0..1_000)
        .map(|i| Message::new(format!("order-{i}"), "PAYMENT", "{}"))
        .collect();
    let signals = [("fail_rate", 0.1), ("heat", 2.0), ("pending", 30.0)];
    let handle = Arc::new(PolicyHandle::new(set(RULES)));
    let plain = RulePolicy::new(Arc::clone(&handle), TimeScale::REAL);
    let logged_release = Release::new(LogOptions::default());
    let logged = plain.clone().with_release(Arc::clone(&logged_release));
    let shadow_release = Release::new(LogOptions::OFF);
    shadow_release.set_shadow(Arc::new(set(&RULES.replace("500ms", "400ms"))));
    let shadowed = plain.clone().with_release(Arc::clone(&shadow_release));

    let mut g = c.benchmark_group("release");
    g.bench_function("engine_alone", |b| {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut i = 0;
        b.iter(|| {
            let m = &messages[i % messages.len()];
            i += 1;
            let mut ctx = FailureContext::new(&m.biz, "PAY_PROCESSING", 2);
            ctx.signals = SignalView::Pairs(&signals);
            black_box(handle.decide(&ctx, &mut rng))
        })
    });
    for (name, p) in [
        ("rule_policy", &plain),
        ("logged", &logged),
        ("shadow", &shadowed),
    ] {
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                let m = &messages[i % messages.len()];
                i += 1;
                if i % 4096 == 0 {
                    // What the journal does each batch.
                    drop(logged_release.log().take());
                }
                let mut ctx = FailureContext::new(&m.biz, "PAY_PROCESSING", 2);
                ctx.signals = SignalView::Pairs(&signals);
                black_box(p.decide(&ctx, m))
            })
        });
    }
    g.finish();

    // Interleaved rounds for the ratios, each over the same 1,000 messages.
    let mut best = [Duration::MAX; 3];
    for _ in 0..20 {
        for (k, p) in [&plain, &logged, &shadowed].into_iter().enumerate() {
            best[k] = best[k].min(per_decision(p, &messages, &signals));
            drop(logged_release.log().take());
        }
    }
    let ns = |d: Duration| d.as_nanos() as f64;
    println!(
        "release: per decision {:.0} ns alone, {:.0} ns logged ({:.2}x), {:.0} ns with a shadow ({:.2}x; target <= 2x)",
        ns(best[0]),
        ns(best[1]),
        ns(best[1]) / ns(best[0]),
        ns(best[2]),
        ns(best[2]) / ns(best[0]),
    );
    c.final_summary();
}
