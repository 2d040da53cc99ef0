//! The claimer: on a shared store, one thread per node that claims due retries for the
//! node's spout tasks, renews the leases of what it holds, and reaps the leases of nodes that
//! died or stalled.
//!
//! - **Claim** in batches sized by free capacity (at most [`SharedOptions::max_claimed`]
//!   held, [`SharedOptions::claim_batch`] per call), when a retry this node scheduled comes
//!   due, at the next due time the store reports, and at least every
//!   [`SharedOptions::poll`] (with jitter, so that N nodes do not claim in step). A claimed
//!   retry goes into its spout task's [`Inbox`], as a replay does on a store of one's own.
//! - **Renew** every lease / 3 the leases of every claim not yet settled; a claim the store
//!   says is no longer this node's is forgotten.
//! - **Reap** every lease / 4 (with jitter) the leases that ran out anywhere in the fleet; a
//!   retry reaped more than [`SharedOptions::max_reaps`] times is a poison message, and is
//!   dead-lettered here (reason `crash_loop`).
//!
//! [`HeldClaims`] is the one record of what this node holds, and the one place a claim's token
//! lives on the node: the claimer adds to it, and the spout task's seams take a claim out when
//! its message gets its next write (a retry written under it, or a fate).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use tokio::time::Instant;

use rebound_engine::backoff::Doubling;
use rebound_engine::{GiveUpReason, Label, RuleRef, Version};

use super::Journal;
use super::queue::Inbox;
use crate::fate::DeadLetter;
use crate::store::{ClaimQueue, ClaimToken, ScheduledRetry, StoreError, WriteOp};
use crate::time::TimeSource;
use crate::topology::{Failure, MessageId};

/// How a node works a shared store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedOptions {
    /// This node's name in the fleet.
    pub node: String,
    /// How long a claimed retry stays this node's without renewal (real time).
    pub lease: Duration,
    /// Reaps after which a retry is dead-lettered as a crash loop (default 5).
    pub max_reaps: u32,
    /// The most retries claimed in one call (default 256).
    pub claim_batch: usize,
    /// The most claims held at once: claimed and not yet settled (default 1024).
    pub max_claimed: usize,
    /// The longest wait between two claims (default 250 ms).
    pub poll: Duration,
}

impl SharedOptions {
    /// Options for `node` with a `lease` and the defaults.
    pub fn new(node: impl Into<String>, lease: Duration) -> SharedOptions {
        SharedOptions {
            node: node.into(),
            lease,
            max_reaps: 5,
            claim_batch: 256,
            max_claimed: 1024,
            poll: Duration::from_millis(250),
        }
    }
}

/// Counters of the claimer's work (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClaimStats {
    /// Retries claimed.
    pub claimed: u64,
    /// Of them, retries claimed again after a reap (a node died or stalled holding them).
    pub reclaims: u64,
    /// Leases this node's reaper returned to the due set.
    pub reaped: u64,
    /// Retries dead-lettered as crash loops.
    pub crash_loops: u64,
    /// Claims held now (claimed, not settled).
    pub held: u64,
    /// Failed calls to the store (each retried).
    pub errors: u64,
}

/// The claims this node holds: claimed, and not yet settled by their message's next write.
#[derive(Debug, Default)]
pub struct HeldClaims {
    held: Mutex<HashMap<MessageId, ClaimToken>>,
}

impl HeldClaims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MessageId, ClaimToken>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, id: MessageId, token: ClaimToken) {
        self.lock().insert(id, token);
    }

    /// The message got its fate: its claim, if this node holds one, is settled.
    pub fn settle(&self, id: &MessageId) {
        self.lock().remove(id);
    }

    /// The message's next retry is written: the claim it is written under, if this node holds
    /// one (the store refuses the write if the claim is no longer this node's).
    pub fn take(&self, id: &MessageId) -> Option<ClaimToken> {
        self.lock().remove(id)
    }

    /// Claims held now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True if no claim is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn snapshot(&self) -> Vec<(MessageId, ClaimToken)> {
        self.lock().iter().map(|(id, t)| (id.clone(), *t)).collect()
    }

    fn forget(&self, id: &MessageId, token: ClaimToken) {
        let mut held = self.lock();
        if held.get(id) == Some(&token) {
            held.remove(id);
        }
    }
}

#[derive(Default)]
struct Counters {
    claimed: AtomicU64,
    reclaims: AtomicU64,
    reaped: AtomicU64,
    crash_loops: AtomicU64,
    errors: AtomicU64,
}

/// What wakes the claimer.
pub(crate) enum Nudge {
    /// A retry was scheduled on this node, due at this instant.
    Due(Instant),
    /// Stop claiming (a graceful stop): what is held is renewed until it settles.
    Pause,
}

/// The handle on a node's claimer thread. Dropping every handle stops the thread.
#[derive(Clone)]
pub(crate) struct Claimer {
    tx: mpsc::Sender<Nudge>,
    held: Arc<HeldClaims>,
    counters: Arc<Counters>,
}

/// The spout tasks' inboxes, filled as the seams make the retry queues.
pub(crate) type Inboxes = Arc<Mutex<Vec<Option<Arc<Inbox>>>>>;

impl Claimer {
    pub(crate) fn spawn(
        claims: Arc<dyn ClaimQueue>,
        journal: Journal,
        time: Arc<dyn TimeSource>,
        inboxes: Inboxes,
        options: SharedOptions,
    ) -> Claimer {
        let (tx, rx) = mpsc::channel();
        let held = Arc::new(HeldClaims::default());
        let counters = Arc::new(Counters::default());
        let mut worker = Worker {
            claims,
            journal,
            inboxes,
            held: held.clone(),
            counters: counters.clone(),
            paused: false,
            errors_in_row: 0,
            jitter: Jitter::new(&options.node, time.wall()),
            options,
            time,
        };
        std::thread::Builder::new()
            .name("rebound-claimer".into())
            .spawn(move || worker.run(&rx))
            .expect("spawning the claimer thread");
        Claimer { tx, held, counters }
    }

    /// A retry was scheduled here, due at `due`: claim it when it is (once the journal has
    /// written it).
    pub(crate) fn nudge(&self, due: Instant) {
        let _ = self.tx.send(Nudge::Due(due));
    }

    /// Stops claiming new retries (held ones keep their leases until they settle).
    pub(crate) fn pause(&self) {
        let _ = self.tx.send(Nudge::Pause);
    }

    pub(crate) fn held(&self) -> &Arc<HeldClaims> {
        &self.held
    }

    pub(crate) fn stats(&self) -> ClaimStats {
        let c = &self.counters;
        ClaimStats {
            claimed: c.claimed.load(Relaxed),
            reclaims: c.reclaims.load(Relaxed),
            reaped: c.reaped.load(Relaxed),
            crash_loops: c.crash_loops.load(Relaxed),
            held: self.held.len() as u64,
            errors: c.errors.load(Relaxed),
        }
    }
}

/// A small xorshift, seeded by the node's name and the wall time: jitter needs no crate.
struct Jitter(u64);

impl Jitter {
    fn new(node: &str, wall: crate::time::Timestamp) -> Jitter {
        let seed = super::fnv1a(node) ^ wall.as_millis().wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Jitter(seed | 1)
    }

    /// `d` scaled by a factor in [0.8, 1.2).
    fn spread(&mut self, d: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let f = 0.8 + (self.0 % 4096) as f64 / 4096.0 * 0.4;
        d.mul_f64(f)
    }
}

/// How long after a local schedule its row is written (a shared store's journal holds no
/// retry back: it polls every millisecond and commits in about one more).
const WRITTEN_AFTER: Duration = Duration::from_millis(4);

/// The longest wait after a failed call to the store.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

struct Worker {
    claims: Arc<dyn ClaimQueue>,
    journal: Journal,
    time: Arc<dyn TimeSource>,
    inboxes: Inboxes,
    held: Arc<HeldClaims>,
    counters: Arc<Counters>,
    options: SharedOptions,
    paused: bool,
    errors_in_row: u32,
    jitter: Jitter,
}

impl Worker {
    fn run(&mut self, rx: &mpsc::Receiver<Nudge>) {
        let lease = self.options.lease;
        let now = self.time.now();
        let mut next_claim = now;
        let mut next_extend = now + lease / 3;
        let mut next_reap = now + self.jitter.spread(lease / 4);
        loop {
            let now = self.time.now();
            let wake = next_claim.min(next_extend).min(next_reap);
            if wake > now {
                match rx.recv_timeout(wake - now) {
                    Ok(Nudge::Due(due)) => {
                        next_claim = next_claim.min(due.max(self.time.now() + WRITTEN_AFTER));
                        continue;
                    }
                    Ok(Nudge::Pause) => {
                        self.paused = true;
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
            let now = self.time.now();
            if now >= next_claim {
                next_claim = self.claim(now);
            }
            if now >= next_extend {
                self.extend();
                next_extend = now + lease / 3;
            }
            if now >= next_reap {
                self.reap();
                next_reap = now + self.jitter.spread(lease / 4);
            }
        }
    }

    fn failed(&mut self, what: &str, e: &StoreError) -> Duration {
        self.counters.errors.fetch_add(1, Relaxed);
        self.errors_in_row += 1;
        if self.errors_in_row == 1 || self.errors_in_row.is_power_of_two() {
            tracing::warn!(error = %e, failures = self.errors_in_row, "{what} failed; retrying");
        }
        Doubling::new(Duration::from_millis(100), MAX_BACKOFF).after(self.errors_in_row)
    }

    /// Claims what is due, up to the free capacity; returns when to claim next.
    fn claim(&mut self, now: Instant) -> Instant {
        let inboxes: Vec<Arc<Inbox>> = {
            let inboxes = self.inboxes.lock().unwrap_or_else(PoisonError::into_inner);
            inboxes.iter().flatten().cloned().collect()
        };
        // No spout task yet (or a graceful stop): nothing to claim for.
        if inboxes.is_empty() || self.paused {
            return now + self.options.poll;
        }
        let free = self.options.max_claimed.saturating_sub(self.held.len());
        if free == 0 {
            return now + Duration::from_millis(10);
        }
        let limit = free.min(self.options.claim_batch);
        let claimed = match self
            .claims
            .claim(&self.options.node, limit, self.options.lease)
        {
            Ok(claimed) => {
                self.errors_in_row = 0;
                claimed
            }
            Err(e) => return now + self.failed("claiming due retries", &e),
        };
        let n = claimed.retries.len();
        self.counters.claimed.fetch_add(n as u64, Relaxed);
        self.counters
            .reclaims
            .fetch_add(claimed.reclaims as u64, Relaxed);
        if n > 0 {
            // Their rows exist: their fates must drop them (the journal is told first).
            self.journal.known_rows(
                claimed
                    .retries
                    .iter()
                    .map(|r| r.message.id.clone())
                    .collect(),
            );
        }
        for retry in claimed.retries {
            let message = retry.message;
            let Some(token) = retry.claim else {
                continue;
            };
            // One line per claim (the fleet tests attribute every second firing by them).
            tracing::debug!(id = %message.id, attempt = message.retry.attempt, token = token.get(), node = %self.options.node, "claimed");
            self.held.insert(message.id.clone(), token);
            let i = super::partition(message.id.as_str(), inboxes.len());
            inboxes[i].push(message);
        }
        if n == limit {
            return self.time.now(); // more may be due
        }
        let wait = match claimed.next_due {
            Some(due) => (due - claimed.now).min(self.options.poll),
            None => self.options.poll,
        };
        self.time.now() + self.jitter.spread(wait).max(Duration::from_millis(1))
    }

    fn extend(&mut self) {
        let held = self.held.snapshot();
        for chunk in held.chunks(512) {
            match self
                .claims
                .extend(&self.options.node, chunk, self.options.lease)
            {
                Ok(still) => {
                    for ((id, token), held) in chunk.iter().zip(still) {
                        if !held {
                            self.held.forget(id, *token);
                        }
                    }
                }
                Err(e) => {
                    self.failed("renewing leases", &e);
                    return;
                }
            }
        }
    }

    fn reap(&mut self) {
        let o = &self.options;
        let reaped = match self.claims.reap(&o.node, 256, o.max_reaps, o.lease) {
            Ok(reaped) => reaped,
            Err(e) => {
                self.failed("reaping expired leases", &e);
                return;
            }
        };
        for id in &reaped.returned {
            // One line per reap (the fleet tests attribute a second claim to it).
            tracing::debug!(id = %id, node = %o.node, "reaped: its lease ran out");
        }
        if !reaped.returned.is_empty() {
            tracing::info!(
                count = reaped.returned.len(),
                "returned retries whose lease ran out to the due set"
            );
        }
        self.counters
            .reaped
            .fetch_add(reaped.returned.len() as u64, Relaxed);
        if reaped.crash_loops.is_empty() {
            return;
        }
        let at = self.time.wall();
        let ops: Vec<WriteOp> = reaped
            .crash_loops
            .into_iter()
            .map(|retry| WriteOp::DeadLetter(Box::new(crash_loop(retry, o.max_reaps, at))))
            .collect();
        let count = ops.len() as u64;
        self.journal.known_rows(
            ops.iter()
                .filter_map(|op| op.retry_row().cloned())
                .collect(),
        );
        match self.journal.commit_blocking(ops) {
            Ok(_) => {
                self.counters.crash_loops.fetch_add(count, Relaxed);
                tracing::warn!(
                    count,
                    "dead-lettered retries that crashed every node that claimed them"
                );
            }
            // Their leases run out again, and the next reap tries again.
            Err(e) => {
                self.failed("dead-lettering crash loops", &e);
            }
        }
    }
}

/// The dead letter of a retry whose claims ran out more than `max_reaps` times.
fn crash_loop(retry: ScheduledRetry, max_reaps: u32, at: crate::time::Timestamp) -> DeadLetter {
    let message = retry.message;
    let last = message.retry.last_failure().cloned();
    DeadLetter {
        failure: Failure {
            code: "CRASH_LOOP".into(),
            message: format!(
                "claimed and lost {} times: every node that took it died or stalled before its fate{}",
                max_reaps + 1,
                last.map(|l| format!(" (last failure before: {} {})", l.code, l.message))
                    .unwrap_or_default()
            ),
            retry_after: None,
            attrs: Default::default(),
        },
        message,
        label: Label::from("CRASH_LOOP"),
        reason: GiveUpReason::CrashLoop,
        rule: RuleRef::Rule("none".into()),
        version: Version::from_hash(0),
        at,
    }
}
