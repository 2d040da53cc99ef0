//! In-memory implementations of the failure seam: a fixed retry policy, a delay
//! queue, and a dead-letter list. Good for tests, examples and benchmarks; nothing survives a
//! restart.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_engine::backoff::Doubling;
use tokio::time::Instant;

use super::{
    AckedFates, BoxFuture, DeadLetter, DeadLetterSink, Decided, Decision, FailureContext,
    FailurePolicy, GiveUpReason, Label, RetryQueue, RuleRef, SinkError, Version,
};
use crate::delays::Delays;
use crate::time::{TimeMap, Timestamp, TokioTime};
use crate::topology::Message;

/// A fixed policy: exponential backoff (`base_delay * 2^(attempt-1)`, capped at `max_delay`,
/// never shorter than the failure's `retry_after`) up to `max_attempts` deliveries, and codes
/// in `give_up_codes` dead-lettered at once.
#[derive(Clone, Debug)]
pub struct FixedPolicy {
    /// Deliveries allowed in all; the failure of the last one is dead-lettered.
    pub max_attempts: u32,
    /// The delay after the first failure.
    pub base_delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// Codes never retried.
    pub give_up_codes: BTreeSet<String>,
    /// The dead-letter label.
    pub label: String,
}

impl Default for FixedPolicy {
    fn default() -> Self {
        FixedPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(30),
            give_up_codes: BTreeSet::new(),
            label: "L1".into(),
        }
    }
}

impl FixedPolicy {
    /// The rule id this policy reports.
    pub const RULE: &'static str = "fixed";
    /// The version this policy reports (`00000000000000f1`).
    pub fn version() -> Version {
        Version::from_hash(0xf1)
    }
}

impl FailurePolicy for FixedPolicy {
    fn decide(&self, ctx: &FailureContext<'_>, _message: &Message) -> Decided {
        // Interned once: a name's interning takes a global lock.
        static RULE: std::sync::LazyLock<RuleRef> =
            std::sync::LazyLock::new(|| RuleRef::Rule(FixedPolicy::RULE.into()));
        let rule = RULE.clone();
        let give_up = |reason| Decision::DeadLetter {
            label: Label::from(self.label.as_str()),
            reason,
            rule: rule.clone(),
        };
        let decision = if self.give_up_codes.contains(ctx.code) {
            give_up(GiveUpReason::GiveUp)
        } else if ctx.attempt >= self.max_attempts {
            give_up(GiveUpReason::MaxRetries)
        } else {
            let backoff = Doubling::new(self.base_delay, self.max_delay).after(ctx.attempt.max(1));
            Decision::Retry {
                delay: backoff.max(ctx.retry_after.unwrap_or_default()),
                rule,
            }
        };
        Decided {
            decision,
            version: Self::version(),
        }
    }
}

/// Acked fates recorded nowhere: the in-memory runtime needs no record of them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unrecorded;

impl AckedFates for Unrecorded {
    fn acked(&self, _: &Message, _: Timestamp) {}
}

/// A delay queue in memory (the runtime's one, [`RetryScheduler`](crate::scheduler::RetryScheduler)):
/// earliest due first, equal due times (to the millisecond) in insertion order, a message
/// scheduled again under its id moved, and nothing ever dropped or returned twice.
#[derive(Debug)]
pub struct MemoryRetryQueue {
    delays: Delays,
}

impl MemoryRetryQueue {
    /// An empty queue on tokio's clock (a paused one too).
    pub fn new() -> Self {
        MemoryRetryQueue {
            delays: Delays::new(TimeMap::new(&TokioTime::new())),
        }
    }
}

impl Default for MemoryRetryQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryQueue for MemoryRetryQueue {
    fn schedule(&mut self, due: Instant, message: Message) {
        self.delays.schedule(due, message);
    }

    fn pop_due(&mut self, now: Instant) -> Option<Message> {
        self.delays.pop_due(now)
    }

    fn next_due(&self) -> Option<Instant> {
        self.delays.next_due()
    }

    fn len(&self) -> usize {
        self.delays.len()
    }
}

/// Dead letters kept in a shared list. Clones share the list.
#[derive(Clone, Debug, Default)]
pub struct MemoryDeadLetters {
    letters: Arc<Mutex<Vec<DeadLetter>>>,
}

impl MemoryDeadLetters {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything stored so far, in order.
    pub fn letters(&self) -> Vec<DeadLetter> {
        self.letters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many letters are stored.
    pub fn len(&self) -> usize {
        self.letters.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when none are stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl DeadLetterSink for MemoryDeadLetters {
    fn store<'a>(&'a self, batch: &'a [DeadLetter]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            self.letters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(batch);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Failure;

    fn decide(p: &FixedPolicy, attempt: u32, failure: &Failure) -> Decision {
        let mut ctx = FailureContext::new("ORDER", &failure.code, attempt);
        ctx.retry_after = failure.retry_after;
        p.decide(&ctx, &Message::new("m", "ORDER", "")).decision
    }

    #[test]
    fn fixed_policy_backs_off_then_gives_up() {
        let p = FixedPolicy {
            max_attempts: 3,
            give_up_codes: ["BAD_JSON".to_string()].into(),
            ..FixedPolicy::default()
        };
        let f = Failure::new("DB", "x");
        let delay = |v| match v {
            Decision::Retry { delay, .. } => delay,
            other => panic!("{other:?}"),
        };
        assert_eq!(delay(decide(&p, 1, &f)), Duration::from_millis(100));
        assert_eq!(delay(decide(&p, 2, &f)), Duration::from_millis(200));
        let slow = f.clone().with_retry_after(Duration::from_secs(5));
        assert_eq!(delay(decide(&p, 1, &slow)), Duration::from_secs(5));
        assert!(matches!(
            decide(&p, 3, &f),
            Decision::DeadLetter {
                reason: GiveUpReason::MaxRetries,
                ..
            }
        ));
        assert!(matches!(
            decide(&p, 1, &Failure::new("BAD_JSON", "")),
            Decision::DeadLetter {
                reason: GiveUpReason::GiveUp,
                ..
            }
        ));
    }

    #[test]
    fn retry_queue_orders_by_due_then_insertion() {
        let now = Instant::now();
        let mut q = MemoryRetryQueue::new();
        let later = now + Duration::from_secs(1);
        q.schedule(later, Message::new("b", "X", ""));
        q.schedule(now, Message::new("a1", "X", ""));
        q.schedule(now, Message::new("a2", "X", ""));
        // Due times are kept to the millisecond, rounded up: never earlier than asked.
        let first = q.next_due().unwrap();
        assert!(first >= now && first - now <= Duration::from_millis(1));
        assert_eq!(
            q.pop_due(first).map(|m| m.id.to_string()),
            Some("a1".into())
        );
        assert_eq!(
            q.pop_due(first).map(|m| m.id.to_string()),
            Some("a2".into())
        );
        assert_eq!(q.pop_due(first), None);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_due(later - Duration::from_millis(1)), None);
        let ms = Duration::from_millis(1);
        assert_eq!(
            q.pop_due(later + ms).map(|m| m.id.to_string()),
            Some("b".into())
        );
        assert!(q.is_empty());
    }
}
