//! Every failure of a message's life, through a live topology on the durable store: a message
//! that failed with four different codes (each with its attrs) before it was dead-lettered
//! keeps all four, in order, in its dead letter, with the delay chosen after each retried one.

use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::{Durable, DurableOptions};
use rebound_runtime::fate::{Decided, Decision, FailurePolicy, Label, RuleRef, Version};
use rebound_runtime::store::{SqliteStore, Store};
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;

const CODES: [&str; 4] = ["NET_TIMEOUT", "DB_LOCK_WAIT", "HTTP_503", "PAY_DECLINED"];

/// Retries the first three codes (10 ms × attempt), dead-letters the fourth to L2.
struct ByCode;

impl FailurePolicy for ByCode {
    fn decide(
        &self,
        ctx: &rebound_engine::FailureContext,
        _: &rebound_runtime::topology::Message,
    ) -> Decided {
        let rule = RuleRef::Rule(
            ctx.code
                .to_ascii_lowercase()
                .replace('_', "-")
                .as_str()
                .into(),
        );
        let decision = if ctx.code == "PAY_DECLINED" {
            Decision::DeadLetter {
                label: Label::from("L2"),
                reason: rebound_engine::GiveUpReason::GiveUp,
                rule,
            }
        } else {
            Decision::Retry {
                delay: Duration::from_millis(10 * u64::from(ctx.attempt)),
                rule,
            }
        };
        Decided {
            decision,
            version: Version::from_hash(7),
        }
    }
}

struct One(bool);

impl Spout for One {
    fn next(&mut self) -> NextMessage {
        if std::mem::replace(&mut self.0, true) {
            return NextMessage::Exhausted;
        }
        NextMessage::Ready(Message::new("m-4", "PAYMENT", "{}"))
    }
    fn ack(&mut self, _: &MessageId) {}
    fn dead_lettered(&mut self, _: &MessageId) {}
}

/// Fails attempt n with the n-th code, attrs naming the attempt and a host.
struct FourCodes;

impl Bolt for FourCodes {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let attempt = input.int("attempt").unwrap_or(0) as usize;
        let code = CODES[(attempt - 1).min(3)];
        Err(Failure::new(code, format!("{code} at attempt {attempt}"))
            .with_attr("attempt", attempt.to_string())
            .with_attr("host", format!("db-{attempt}")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_different_failures_are_kept_in_order_with_their_attrs_in_the_dead_letter() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        DurableOptions::default(),
    );
    let mut b = TopologyBuilder::new("t");
    b.spout("src", 1, |_| One(false));
    b.bolt("fail", 1, |_| FourCodes).shuffle("src");
    let running = b.build().unwrap().start(durable.seams(ByCode));
    tokio::time::timeout(Duration::from_secs(20), running.wait_quiescent())
        .await
        .unwrap();
    running.shutdown(Duration::from_secs(5)).await;
    durable.journal().flush().await;

    let letter = store
        .dead_letter(&MessageId::from("m-4"))
        .unwrap()
        .expect("dead-lettered")
        .letter;
    let failures = letter.failures();
    let codes: Vec<&str> = failures.records().iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, CODES);
    for (i, f) in failures.records().iter().enumerate() {
        let attempt = i as u32 + 1;
        assert_eq!(f.attempt, attempt);
        assert_eq!(f.attrs["attempt"], attempt.to_string());
        assert_eq!(f.attrs["host"], format!("db-{attempt}"));
        assert_eq!(f.message, format!("{} at attempt {attempt}", CODES[i]));
        let delay = (attempt < 4).then(|| Duration::from_millis(10 * u64::from(attempt)));
        assert_eq!(f.delay, delay, "attempt {attempt}");
    }
    assert_eq!(failures.records()[0].rule.as_str(), "net-timeout");
    assert_eq!(failures.dropped(), 0);
    assert!(failures.records().windows(2).all(|w| w[0].at <= w[1].at));
}
