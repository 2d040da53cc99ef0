//! A spout task's side of the [`RetryGate`]: it asks the gate before it fires a due retry,
//! holds back the ones the gate refuses (in memory: their rows stay in the store, so a crash
//! loses none) and asks again every [`HOLD_TICK`], and tells the gate of first deliveries and
//! finished trees. With a set that has no budgets or breakers only the fuse is asked.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rebound_engine::{CompiledSet, FailureContext};
use tokio::time::Instant;

use crate::adaptive::{RetryGate, gate};
use crate::fate::{FailurePolicy, RetryQueue};
use crate::time::TimeScale;
use crate::topology::{Failure, Message};

/// How often held retries are asked about again.
pub(crate) const HOLD_TICK: Duration = Duration::from_millis(50);

pub(crate) struct Gating {
    gate: Arc<RetryGate>,
    /// Due retries the gate refused, oldest first.
    held: VecDeque<Message>,
}

/// The policy's set, when it declares budgets or breakers.
fn rules(policy: &dyn FailurePolicy) -> Option<(Arc<CompiledSet>, TimeScale)> {
    policy.adaptive().filter(|(set, _)| gate::active(set))
}

/// The scope of a message's last failure (`None` for a message that never failed).
fn last_scope(message: &Message) -> Option<FailureContext<'_>> {
    let last = message.retry.last_failure()?;
    let mut ctx = FailureContext::new(&message.biz, &last.code, message.retry.attempt);
    ctx.attrs = &last.attrs;
    Some(ctx)
}

impl Gating {
    pub(crate) fn new(gate: Arc<RetryGate>) -> Gating {
        Gating {
            gate,
            held: VecDeque::new(),
        }
    }

    /// Retries held back now.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// When to ask about the held retries again.
    pub(crate) fn next_check(&self, now: Instant) -> Option<Instant> {
        (!self.held.is_empty()).then(|| now + HOLD_TICK)
    }

    /// The next due retry the gate lets fire: a held one first, then the queue's (each due
    /// one it refuses is held). The caller asks only while the fuse is not open: open, it
    /// holds every retry in the queue, where they are.
    pub(crate) fn pop_due(
        &mut self,
        policy: &dyn FailurePolicy,
        queue: &mut dyn RetryQueue,
        now: Instant,
    ) -> Option<Message> {
        // Without budgets or breakers (any more) only the fuse is asked; what was held goes
        // first.
        let rules = rules(policy);
        let admit = |m: &Message| match &rules {
            Some((set, scale)) => self.gate.admit(set, *scale, m, now),
            None => self.gate.fuse_admits(&m.id, now),
        };
        for _ in 0..self.held.len() {
            let m = self.held.pop_front()?;
            if admit(&m) {
                return Some(m);
            }
            self.held.push_back(m);
        }
        while let Some(m) = queue.pop_due(now) {
            if admit(&m) {
                return Some(m);
            }
            self.held.push_back(m);
        }
        None
    }

    /// A first delivery of `message` at `now`.
    pub(crate) fn first_delivery(
        &self,
        policy: &dyn FailurePolicy,
        message: &Message,
        now: Instant,
    ) {
        if let Some((set, scale)) = rules(policy) {
            self.gate.first_delivery(&set, scale, &message.biz, now);
        }
    }

    /// `message`'s tree finished at `now`: acked, or failed with `failure`.
    pub(crate) fn finished(
        &self,
        policy: &dyn FailurePolicy,
        message: &Message,
        failure: Option<&Failure>,
        now: Instant,
    ) {
        let Some((set, scale)) = rules(policy) else {
            return;
        };
        let failed = failure.map(|f| {
            let mut ctx = FailureContext::new(&message.biz, &f.code, message.retry.attempt);
            ctx.attrs = &f.attrs;
            ctx
        });
        let last = last_scope(message);
        self.gate.finished(
            &set,
            scale,
            &message.biz,
            failed.as_ref(),
            last.as_ref(),
            now,
        );
    }

    /// Whether a breaker of `ctx`'s scope is open or half-open, once those that open on its
    /// biz's heat `heat` have opened (the failure's decision sees them open).
    pub(crate) fn breaker_open(
        &self,
        policy: &dyn FailurePolicy,
        ctx: &FailureContext<'_>,
        heat: f64,
        now: Instant,
    ) -> bool {
        let Some((set, scale)) = rules(policy) else {
            return false;
        };
        self.gate.heat_seen(&set, scale, ctx, heat, now);
        self.gate.breaker_open(&set, ctx, now)
    }
}
