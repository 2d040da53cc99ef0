//! Fault heat through a live topology: each failure's weight (the policy's `heat_weight`) adds
//! to its biz's heat before the policy decides it, so a decision sees `signals.heat` rise as
//! the failures of its biz accumulate, and `signals.heat_total` sum every biz.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::paused_runtime;
use rebound_runtime::fate::{
    Decided, Decision, FailureContext, FailurePolicy, GiveUpReason, Label, RuleRef, Seams, Version,
};
use rebound_runtime::topology::*;

/// One decision as the policy saw it: (biz, signals.heat, signals.heat_total, breaker_open).
type Seen = (String, f64, f64, f64);

/// Dead-letters every failure, recording the signals it was given; a `NET_TIMEOUT` weighs 3.
struct Recording {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FailurePolicy for Recording {
    fn decide(&self, ctx: &FailureContext<'_>, _: &rebound_runtime::topology::Message) -> Decided {
        let signal = |name| ctx.signals.get(name).expect(name);
        self.seen.lock().unwrap().push((
            ctx.biz.to_owned(),
            signal("heat"),
            signal("heat_total"),
            signal("breaker_open"),
        ));
        Decided {
            decision: Decision::DeadLetter {
                label: Label::from("L2"),
                reason: GiveUpReason::GiveUp,
                rule: RuleRef::Rule("recording".into()),
            },
            version: Version::from_hash(1),
        }
    }

    fn heat_weight(&self, code: &str) -> f64 {
        if code == "NET_TIMEOUT" { 3.0 } else { 1.0 }
    }

    fn heat_half_life(&self) -> Duration {
        Duration::from_secs(3600)
    }
}

/// Hands out `PAYMENT` and `ORDER` messages in turn, `total` in all.
struct TwoBiz {
    next: u32,
    total: u32,
}

impl Spout for TwoBiz {
    fn next(&mut self) -> NextMessage {
        if self.next == self.total {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        let biz = if self.next % 2 == 1 {
            "PAYMENT"
        } else {
            "ORDER"
        };
        NextMessage::Ready(Message::new(format!("m-{}", self.next), biz, "{}"))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Fails a `PAYMENT` with `NET_TIMEOUT`, anything else with `DB_LOCK`.
struct Failing;

impl Bolt for Failing {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        match input.str("biz") {
            Some("PAYMENT") => Err(Failure::new("NET_TIMEOUT", "gateway timed out")),
            _ => Err(Failure::new("DB_LOCK", "lock wait")),
        }
    }
}

#[test]
fn a_policy_sees_the_heat_of_its_biz_rise_as_its_failures_accumulate() {
    let seen = paused_runtime().block_on(async {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut b = TopologyBuilder::new("heat");
        b.config(Config {
            // One tree at a time: the decisions come in the spout's order.
            max_spout_pending: 1,
            ..Config::default()
        });
        b.spout("source", 1, |_| TwoBiz { next: 0, total: 20 });
        b.bolt("fail", 1, |_| Failing).shuffle("source");
        let policy = Recording { seen: seen.clone() };
        let running = b
            .build()
            .unwrap()
            .start(Seams::in_memory().with_policy(policy));
        running.wait_quiescent().await;
        let heat = running.heat();
        running.shutdown(Duration::from_secs(5)).await;
        assert_eq!(heat.tracked(), 2, "the topology's heat holds both biz");
        seen.lock().unwrap().clone()
    });
    assert_eq!(seen.len(), 20);
    // A half-life of an hour and a paused clock: the heats are the weights' sums, to rounding.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.max(1.0);
    let (mut payment, mut order) = (0.0, 0.0);
    for (biz, heat, total, breaker_open) in &seen {
        if biz == "PAYMENT" {
            payment += 3.0;
            assert!(
                close(*heat, payment),
                "PAYMENT heat {heat}, expected {payment}"
            );
        } else {
            order += 1.0;
            assert!(close(*heat, order), "ORDER heat {heat}, expected {order}");
        }
        assert!(close(*total, payment + order), "total {total}");
        assert_eq!(*breaker_open, 0.0);
    }
    let payment_heats: Vec<f64> = seen
        .iter()
        .filter(|s| s.0 == "PAYMENT")
        .map(|s| s.1)
        .collect();
    assert!(
        payment_heats.windows(2).all(|w| w[1] > w[0]),
        "rising: {payment_heats:?}"
    );
}
