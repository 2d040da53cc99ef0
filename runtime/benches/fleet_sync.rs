//! What the fleet's adaptive state costs a decision (`operations.md`, "One fleet, one
//! budget": a decision never waits for the sync, it reads the last totals from memory). One
//! failure of a payment as the spout task handles it (its heat added and read, the rules'
//! decision, the budget asked whether it may be scheduled, its due retry asked to fire, the
//! first delivery and the finished tree counted) with no fleet (the process's own gate), and
//! with a [`FleetSync`] syncing the same gate and heat with a [`MemoryFleet`] every 200 ms
//! (production) and every 1 ms (a sync thread always at the lock). Printed at the end as
//! ratios over interleaved rounds (target: unchanged, ≈ 1×).
//!
//! `cargo bench -p rebound-runtime --bench fleet_sync`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use rebound_engine::{CompiledSet, FailureContext, PolicyHandle, SourceFile, compile};
use rebound_runtime::adaptive::{FleetSync, Heat, MemoryFleet, RetryGate, SyncParts};
use rebound_runtime::fate::FailurePolicy;
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::time::{Timestamp, TokioTime};
use rebound_runtime::topology::{FailureRecord, FuseConfig, Message};

const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 5, backoff: { exponential: { base: 1s, max: 1m }, jitter: full } }
  dead_letter: L2
rules:
  - id: pay
    match: { biz: PAYMENT, code: PAY_PROCESSING }
    retry: { max_retries: 8, backoff: { exponential: { base: 500ms, max: 30s }, jitter: full } }
    dead_letter: L1
heat:
  half_life: 30s
budgets:
  - { id: payment-retries, match: { biz: PAYMENT }, ratio: 50%, min_per_s: 50, window: 10s }
breakers:
  - { id: gw, match: { biz: PAYMENT, code: [PAY_PROCESSING] }, open_at: 90%, min_samples: 200, window: 10s, cool_down: 30s, ramp: 1m }
";

fn set(yaml: &str) -> CompiledSet {
    compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).expect("the bench's rules")
}

/// A due retry of `id`, after one failure with PAY_PROCESSING.
fn retry(id: &str) -> Message {
    let mut m = Message::new(id, "PAYMENT", "{}");
    m.retry.attempt = 1;
    m.retry.failures.push(FailureRecord {
        attempt: 1,
        at: Timestamp::ZERO,
        code: "PAY_PROCESSING".into(),
        message: String::new(),
        attrs: Default::default(),
        rule: rebound_engine::RuleRef::Defaults,
        version: rebound_engine::Version::from_hash(1),
        delay: Some(Duration::from_millis(10)),
    });
    m
}

/// One topology's adaptive state: its policy, gate and heat, and (on) its sync thread.
struct Side {
    policy: Arc<RulePolicy>,
    set: Arc<CompiledSet>,
    gate: Arc<RetryGate>,
    heat: Arc<Heat>,
    _sync: Option<FleetSync>,
}

impl Side {
    fn new(every: Option<Duration>) -> Side {
        let policy = Arc::new(RulePolicy::new(
            Arc::new(PolicyHandle::new(set(RULES))),
            TimeScale::REAL,
        ));
        let (set, _) = policy
            .adaptive()
            .expect("the bench's rules have budgets and breakers");
        let gate = Arc::new(RetryGate::new(
            &FuseConfig::default(),
            tokio::time::Instant::now(),
        ));
        let heat = Arc::new(Heat::new(Duration::from_secs(30)));
        let sync = every.map(|every| {
            let fleet = MemoryFleet::new();
            FleetSync::start(SyncParts {
                fleet: Arc::new(fleet.node("n0")),
                gate: gate.clone(),
                heat: heat.clone(),
                policy: policy.clone() as Arc<dyn FailurePolicy>,
                time: Arc::new(TokioTime::new()),
                every,
            })
        });
        Side {
            policy,
            set,
            gate,
            heat,
            _sync: sync,
        }
    }

    /// One failure handled, as the spout task handles it.
    fn handle(&self, m: &Message) {
        let now = tokio::time::Instant::now();
        self.gate
            .first_delivery(&self.set, TimeScale::REAL, &m.biz, now);
        let (heat, total) = self.heat.add_and_read(&m.biz, 1.0, now);
        let ctx = FailureContext::new(&m.biz, "PAY_PROCESSING", 2);
        black_box((heat, total, self.policy.decide(&ctx, m)));
        black_box(
            self.gate
                .retry_allowed(&self.set, TimeScale::REAL, &ctx, now),
        );
        black_box(self.gate.admit(&self.set, TimeScale::REAL, m, now));
        self.gate
            .finished(&self.set, TimeScale::REAL, &m.biz, Some(&ctx), None, now);
    }
}

fn per_failure(side: &Side, messages: &[Message]) -> Duration {
    let start = Instant::now();
    for m in messages {
        side.handle(m);
    }
    start.elapsed() / messages.len() as u32
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let messages: Vec<Message> = (0..1_000).map(|i| retry(&format!("order-{i}"))).collect();
    let sides = [
        ("alone", Side::new(None)),
        ("fleet_200ms", Side::new(Some(Duration::from_millis(200)))),
        ("fleet_1ms", Side::new(Some(Duration::from_millis(1)))),
    ];
    let mut g = c.benchmark_group("fleet_sync");
    for (name, side) in &sides {
        g.bench_function(*name, |b| {
            let mut i = 0;
            b.iter(|| {
                side.handle(&messages[i % messages.len()]);
                i += 1;
            })
        });
    }
    g.finish();

    let mut best = [Duration::MAX; 3];
    for _ in 0..20 {
        for (k, (_, side)) in sides.iter().enumerate() {
            best[k] = best[k].min(per_failure(side, &messages));
        }
    }
    let ns = |d: Duration| d.as_nanos() as f64;
    println!(
        "fleet_sync: per failure {:.0} ns alone, {:.0} ns synced every 200 ms ({:.2}x), {:.0} ns \
         synced every 1 ms ({:.2}x; target: unchanged)",
        ns(best[0]),
        ns(best[1]),
        ns(best[1]) / ns(best[0]),
        ns(best[2]),
        ns(best[2]) / ns(best[0]),
    );
    c.final_summary();
}
