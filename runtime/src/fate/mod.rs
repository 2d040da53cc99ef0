//! The failure seam: what happens to a message after its tree fails.
//!
//! When a root fails (a bolt's `Err`, a panic, a timeout, a dropped handle), its spout task
//! builds the engine's [`FailureContext`] from the message's retry metadata, the [`Failure`]
//! and the runtime's [`Signals`], and asks the [`FailurePolicy`] for the engine's [`Decided`]:
//!
//! - [`Decision::Retry`]: the message goes into the task's [`RetryQueue`] at `now + delay`;
//!   the spout task pulls it back out when it is due (mixed with new messages, and held back
//!   while the retry fuse is open).
//! - [`Decision::DeadLetter`]: the [`DeadLetter`] goes to the [`DeadLetterSink`]; only after
//!   the sink stored it is the spout told `dead_lettered(id)`.
//!
//! When a tree completes, the spout task records the acked fate through [`AckedFates`] before
//! it tells the spout: a source never has to remember to.
//!
//! The decision types are the engine's ([`RuleRef`], [`Label`], [`Version`], [`GiveUpReason`]),
//! re-exported here: one vocabulary from the rules to the store.
//!
//! The in-memory implementations in [`memory`] make the whole loop run and testable; the rule
//! engine, the durable scheduler and the SQLite store plug into the same traits.

pub(crate) mod judge;
pub mod memory;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use rebound_engine::{
    Decided, Decision, FailureContext, GiveUpReason, Label, RuleRef, Version,
};
use tokio::time::Instant;

use crate::time::Timestamp;
use crate::topology::{Failure, Key, Message, MessageId};

/// A boxed, sendable future (the seams' async methods return one so they stay object safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The runtime's state, as the policy sees it when it decides. Values are per spout task,
/// except the heats, which are the topology's (every spout task adds to one [`Heat`]).
///
/// [`Heat`]: crate::adaptive::Heat
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Signals {
    /// Failed trees / finished trees over the fuse window (0 when nothing finished).
    pub fail_rate: f64,
    /// Messages waiting in the retry queue.
    pub retry_queue_depth: u64,
    /// Trees in flight (and dead letters being stored).
    pub pending: u64,
    /// Whether the retry fuse is holding retries back.
    pub fuse_open: bool,
    /// The fault heat of the failed message's biz, this failure included.
    pub heat: f64,
    /// The fault heat of every biz together.
    pub heat_total: f64,
    /// Whether a circuit breaker over this failure is open (never yet: breakers are to come).
    pub breaker_open: bool,
}

impl Signals {
    /// The signals by name, as numbers (`fuse_open` and `breaker_open` are 0 or 1): what the
    /// rules see as `signals.*`. On the stack, so a decision borrows them without allocating.
    pub fn named(&self) -> [(&'static str, f64); 7] {
        [
            ("fail_rate", self.fail_rate),
            ("retry_queue_depth", self.retry_queue_depth as f64),
            ("pending", self.pending as f64),
            ("fuse_open", if self.fuse_open { 1.0 } else { 0.0 }),
            ("heat", self.heat),
            ("heat_total", self.heat_total),
            ("breaker_open", if self.breaker_open { 1.0 } else { 0.0 }),
        ]
    }
}

/// The longest a retry waits: what the store's millisecond columns hold (`i64::MAX` ms, about
/// 292 million years). A longer retry delay (a `retry_after` of 2^64 − 1 ms, a delay divided by
/// a time scale below 1) is scheduled at this bound: every time computed from it fits every
/// clock and column, so nothing overflows or wraps on the way to the store.
pub const MAX_RETRY_DELAY: Duration = Duration::from_millis(i64::MAX as u64);

/// The half-life of fault heat when the rule set names none (`heat.half_life`, rules' time).
pub const DEFAULT_HEAT_HALF_LIFE: Duration = Duration::from_secs(30);

/// Decides retry or dead letter for a failed message, in the engine's own terms: it takes the
/// engine's [`FailureContext`] (built by the spout task from the message, the failure and the
/// [`Signals`], nothing copied) and answers the engine's [`Decided`]. Called on the spout task,
/// so it must be quick and must not block (a rule-engine `decide` is). It should not panic; if
/// it does, the message becomes a dead letter with [`GiveUpReason::PolicyError`].
///
/// The policy also says how much each failure heats its biz (see [`Heat`]): the spout task
/// asks [`FailurePolicy::heat_weight`] and [`FailurePolicy::heat_half_life`] just before
/// [`FailurePolicy::decide`], so the decision's `signals.heat` includes its own failure.
///
/// [`Heat`]: crate::adaptive::Heat
pub trait FailurePolicy: Send + Sync + 'static {
    /// Decides one failure of `message` (the message whose tree failed: its id and ordering
    /// key seed the jitter and pick a canary's arm, `release.md`; the context borrows its
    /// fields).
    fn decide(&self, ctx: &FailureContext<'_>, message: &Message) -> Decided;

    /// Hears what happened to a message (a canary counts its arms' outcomes by it). Called on
    /// the spout task; nothing by default.
    fn observe(&self, message: &Message, event: crate::release::Observed) {
        let _ = (message, event);
    }

    /// What one failure with `code` adds to its biz's heat (the rule set's `heat.weights`).
    /// 1 unless the policy says otherwise.
    fn heat_weight(&self, code: &str) -> f64 {
        let _ = code;
        1.0
    }

    /// How fast heat cools, in real time: it halves every this long (the rule set's
    /// `heat.half_life`). [`DEFAULT_HEAT_HALF_LIFE`] unless the policy says otherwise; asked
    /// at every failure, so a policy whose rules reload may change it.
    fn heat_half_life(&self) -> Duration {
        DEFAULT_HEAT_HALF_LIFE
    }

    /// The rule set in force and the time scale its durations run at, for the budgets and
    /// breakers it declares (the runtime keeps their state: `adaptive::RetryGate`). `None`
    /// (the default): a policy without them.
    fn adaptive(
        &self,
    ) -> Option<(
        std::sync::Arc<rebound_engine::CompiledSet>,
        crate::time::TimeScale,
    )> {
        None
    }
}

/// Where retries wait until they are due: one queue per spout task, owned by that task (so no
/// locks). Entries must never be lost, fire twice, or fire early.
///
/// Methods are called on the spout task and must not block: a durable implementation keeps
/// the due order in memory and writes behind (and flushes in [`RetryQueue::flush`]).
pub trait RetryQueue: Send + 'static {
    /// Adds a message (its `retry` metadata already updated) to be delivered at `due`.
    fn schedule(&mut self, due: Instant, message: Message);
    /// Adds a retry that must come back to this task: later messages of its key wait here
    /// for it (ordered keys). A queue whose retries any process may fire (a shared store)
    /// keeps this one to itself; the default schedules it as any other.
    fn schedule_local(&mut self, due: Instant, message: Message) {
        self.schedule(due, message);
    }
    /// Removes and returns one message whose due time is `<= now`, earliest first.
    fn pop_due(&mut self, now: Instant) -> Option<Message>;
    /// The earliest due time, if any.
    fn next_due(&self) -> Option<Instant>;
    /// The number of waiting messages.
    fn len(&self) -> usize;
    /// True when nothing waits.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Makes everything scheduled durable; called when the spout task stops.
    fn flush(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// A handle the queue notifies when a message is added from outside the spout task (an
    /// operator's replay, for one), so that the task wakes up to deliver it. `None`, the
    /// default, for a queue that only its task fills. Asked once, when the task starts.
    fn notifier(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }
}

/// Where a spout task's ordered keys hear what happened outside the task to messages with a
/// key (see [`KeyNotice`]): retries recovered after a restart, letters found open at the
/// start, an operator's kill or skip. One per spout task, made by [`Seams::key_notices`]
/// right after the task's retry queue; asked once per pass, only by a task that orders keys.
pub trait KeyNotices: Send + Sync + 'static {
    /// Moves into `into` what happened since the last call, in order.
    fn take(&self, into: &mut Vec<KeyNotice>);
}

/// Where a spout task hears which of its messages passed into the store's custody before
/// their fate: their first retry committed, with its payload (the task then calls
/// [`Spout::retained`](crate::topology::Spout::retained)). One per spout task, made by
/// [`Seams::custody`] right after the task's retry queue; asked once per pass.
pub trait CustodyNotices: Send + Sync + 'static {
    /// Moves into `into` the messages retained since the last call, in commit order.
    fn take(&self, into: &mut Vec<MessageId>);
}

/// What a spout task's ordered keys must hear of a message with a key that something outside
/// the task handled: handed over by [`KeyNotices::take`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyNotice {
    /// What happened.
    pub kind: NoticeKind,
    /// The message.
    pub id: MessageId,
    /// Its key.
    pub key: Key,
    /// Its biz (a key is ordered only for the biz types the topology orders).
    pub biz: std::sync::Arc<str>,
}

/// What a [`KeyNotice`] tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// Its retry waits in the queue (recovered after a restart): later messages of its key wait
    /// for its fate.
    Waiting,
    /// It was dead-lettered outside the task (an operator killed its retry), or its open dead
    /// letter was found at the start: under `on_dead_letter: block` its key is blocked.
    DeadLettered,
    /// An operator skipped its dead letter: its key is no longer blocked.
    Skipped,
}

impl KeyNotice {
    /// The notice `kind` of `message`, if it has a key.
    pub fn of(kind: NoticeKind, message: &Message) -> Option<KeyNotice> {
        Some(KeyNotice {
            kind,
            id: message.id.clone(),
            key: message.key.clone()?,
            biz: message.biz.clone(),
        })
    }
}

/// A message given up on, with everything an operator needs to understand and replay it: the
/// message itself (its id, content and retry metadata), the failure that ended it (code,
/// message, attributes) and the decision. One shape from the spout task to the store.
#[derive(Clone, Debug, PartialEq)]
pub struct DeadLetter {
    /// The message, whole, so it can be replayed (`retry.attempt` = deliveries made,
    /// `retry.first_delivery` = when the first began).
    pub message: Message,
    /// The failure that ended it.
    pub failure: Failure,
    /// The label from the deciding rule.
    pub label: Label,
    /// Why it was given up on.
    pub reason: GiveUpReason,
    /// The deciding rule.
    pub rule: RuleRef,
    /// The rule-set version that decided.
    pub version: Version,
    /// When it was given up on.
    pub at: Timestamp,
}

impl DeadLetter {
    /// The message id.
    pub fn id(&self) -> &MessageId {
        &self.message.id
    }

    /// When the first delivery began (the give-up time if it was never recorded).
    pub fn first_at(&self) -> Timestamp {
        self.message.retry.first_delivery.unwrap_or(self.at)
    }

    /// Every failure of the message's life, in order: those it was retried for (its
    /// history) and the one that ended it (no delay), the first 16 and the last 16 beyond 32.
    pub fn failures(&self) -> crate::topology::Failures {
        let mut all = self.message.retry.failures.clone();
        all.push(crate::topology::FailureRecord {
            attempt: self.message.retry.attempt,
            at: self.at,
            code: self.failure.code.clone(),
            message: self.failure.message.clone(),
            attrs: self.failure.attrs.clone(),
            rule: self.rule.clone(),
            version: self.version,
            delay: None,
        });
        all
    }
}

/// A dead-letter store failed to store a batch; the runtime retries the batch.
#[derive(Debug, thiserror::Error)]
#[error("dead-letter store failed: {0}")]
pub struct SinkError(pub String);

/// Stores dead letters durably. The runtime calls `dead_lettered(id)` on the spout only after
/// `store` returned `Ok` for the batch holding `id`; on `Err` it logs, waits and tries the same
/// batch again (it never drops one). Storing the same letter twice must be harmless.
pub trait DeadLetterSink: Send + Sync + 'static {
    /// Stores a batch durably.
    fn store<'a>(&'a self, batch: &'a [DeadLetter]) -> BoxFuture<'a, Result<(), SinkError>>;
}

/// Records that a message was acked, before its spout is told. Called on the spout task: it must
/// not block (a durable implementation queues the fate to its journal).
pub trait AckedFates: Send + Sync + 'static {
    /// `message`'s tree completed at `at` (the spout task's wall time for its batch of
    /// fates).
    fn acked(&self, message: &Message, at: Timestamp);
}

/// Makes the retry queue of one spout task.
pub type RetryQueueFactory =
    std::sync::Arc<dyn Fn(&crate::topology::TaskInfo) -> Box<dyn RetryQueue> + Send + Sync>;

/// Makes the key notices of one spout task (asked right after its retry queue); `None`: no
/// notices ever come from outside the task.
pub type KeyNoticesFactory = std::sync::Arc<
    dyn Fn(&crate::topology::TaskInfo) -> Option<std::sync::Arc<dyn KeyNotices>> + Send + Sync,
>;

/// Makes the custody notices of one spout task (asked right after its retry queue); `None`:
/// custody comes only with the final fate (no durable store).
pub type CustodyFactory = std::sync::Arc<
    dyn Fn(&crate::topology::TaskInfo) -> Option<std::sync::Arc<dyn CustodyNotices>> + Send + Sync,
>;

/// The parts a running topology plugs in for failures and time. [`Seams::in_memory`] gives
/// working in-memory defaults; replace any part with its `with_*` method.
#[derive(Clone)]
pub struct Seams {
    /// Decides retry vs dead letter.
    pub policy: std::sync::Arc<dyn FailurePolicy>,
    /// Stores dead letters.
    pub dead_letters: std::sync::Arc<dyn DeadLetterSink>,
    /// Makes the retry queue of each spout task.
    pub retry_queues: RetryQueueFactory,
    /// Makes the key notices of each spout task (none, in memory).
    pub key_notices: KeyNoticesFactory,
    /// Makes the custody notices of each spout task (none, in memory).
    pub custody: CustodyFactory,
    /// Records acked fates (nothing, in memory).
    pub acked: std::sync::Arc<dyn AckedFates>,
    /// Monotonic and wall-clock time.
    pub time: std::sync::Arc<dyn crate::time::TimeSource>,
    /// The fleet's adaptive state, on a shared store (none: the process's own, as with
    /// SQLite). With one, the topology syncs its budgets, breakers, fuse and heat with it
    /// (`adaptive::FleetSync`).
    pub fleet: Option<std::sync::Arc<dyn crate::adaptive::FleetState>>,
}

impl Seams {
    /// [`memory::FixedPolicy::default`], [`memory::MemoryDeadLetters`],
    /// [`memory::MemoryRetryQueue`], no key notices, no custody before a fate, no record of acked fates, and
    /// [`TokioTime`](crate::time::TokioTime).
    pub fn in_memory() -> Seams {
        Seams {
            policy: std::sync::Arc::new(memory::FixedPolicy::default()),
            dead_letters: std::sync::Arc::new(memory::MemoryDeadLetters::new()),
            retry_queues: std::sync::Arc::new(|_| Box::new(memory::MemoryRetryQueue::new())),
            key_notices: std::sync::Arc::new(|_| None),
            custody: std::sync::Arc::new(|_| None),
            acked: std::sync::Arc::new(memory::Unrecorded),
            time: std::sync::Arc::new(crate::time::TokioTime::new()),
            fleet: None,
        }
    }

    /// The same seams with the fleet's adaptive state `fleet` (a shared store's).
    pub fn with_fleet_state(
        mut self,
        fleet: std::sync::Arc<dyn crate::adaptive::FleetState>,
    ) -> Seams {
        self.fleet = Some(fleet);
        self
    }

    /// The same seams with another policy.
    pub fn with_policy(mut self, policy: impl FailurePolicy) -> Seams {
        self.policy = std::sync::Arc::new(policy);
        self
    }

    /// The same seams with another dead-letter sink.
    pub fn with_dead_letters(mut self, sink: impl DeadLetterSink) -> Seams {
        self.dead_letters = std::sync::Arc::new(sink);
        self
    }

    /// The same seams with another retry-queue factory.
    pub fn with_retry_queues(
        mut self,
        make: impl Fn(&crate::topology::TaskInfo) -> Box<dyn RetryQueue> + Send + Sync + 'static,
    ) -> Seams {
        self.retry_queues = std::sync::Arc::new(make);
        self
    }

    /// The same seams with another key-notices factory (asked right after each task's retry
    /// queue is made).
    pub fn with_key_notices(
        mut self,
        make: impl Fn(&crate::topology::TaskInfo) -> Option<std::sync::Arc<dyn KeyNotices>>
        + Send
        + Sync
        + 'static,
    ) -> Seams {
        self.key_notices = std::sync::Arc::new(make);
        self
    }

    /// The same seams with another custody-notices factory (asked right after each task's
    /// retry queue is made).
    pub fn with_custody(
        mut self,
        make: impl Fn(&crate::topology::TaskInfo) -> Option<std::sync::Arc<dyn CustodyNotices>>
        + Send
        + Sync
        + 'static,
    ) -> Seams {
        self.custody = std::sync::Arc::new(make);
        self
    }

    /// The same seams recording acked fates with `acked`.
    pub fn with_acked_fates(mut self, acked: impl AckedFates) -> Seams {
        self.acked = std::sync::Arc::new(acked);
        self
    }

    /// The same seams with another time source.
    pub fn with_time(mut self, time: impl crate::time::TimeSource) -> Seams {
        self.time = std::sync::Arc::new(time);
        self
    }
}
