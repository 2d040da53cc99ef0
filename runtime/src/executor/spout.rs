//! The spout task: emits deliveries (new messages mixed with due retries) under
//! `max_spout_pending`, and turns each tree's terminal into the message's fate — `ack`, a
//! retry, or a dead letter. It also reports when it stalls at its limit (see `stall`), and
//! holds back the later messages of an ordered key (see `ordering`).
//!
//! This file holds the loop and the fates: a failed tree's fate is the judge's
//! (`fate::judge`), which the task only routes. The delivering side is `spout/emit.rs`; what
//! the task publishes and logs is `spout/report.rs`.

mod emit;
mod report;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::gating::{self, Gating};
use super::{Control, SpoutStatus, guarded};
use crate::acker::{Fates, Terminal};
use crate::adaptive::{self, Heat};
use crate::fairness::Mixer;
use crate::fate::judge::{Case, Verdict, judge};
use crate::fate::{
    AckedFates, CustodyNotices, DeadLetter, DeadLetterSink, FailureContext, FailurePolicy,
    KeyNotice, KeyNotices, RetryQueue, Signals,
};
use crate::stats::{ACKED_ATTEMPTS, Histogram, Stats};
use crate::time::{TimeSource, Timestamp};
use crate::topology::{Config, Failure, Message, MessageId, Spout, codes};

use super::dead_letters::{DeadLetterBatcher, Stored};
use super::ordering::{KeyLines, LineKey};
use super::outbox::Outbox;
use super::pending::PendingTable;
use super::stall::StallWatch;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Open,
    Idle,
    Exhausted,
}

/// Everything a spout task is wired to.
pub(crate) struct SpoutParts {
    pub(crate) global: u32,
    pub(crate) cfg: Arc<Config>,
    pub(crate) outbox: Outbox,
    pub(crate) fates: mpsc::Receiver<Fates>,
    pub(crate) policy: Arc<dyn FailurePolicy>,
    pub(crate) queue: Box<dyn RetryQueue>,
    /// What the ordered keys hear from outside the task, if anything.
    pub(crate) notices: Option<Arc<dyn KeyNotices>>,
    /// Which messages passed into the store's custody before their fate, if a store can.
    pub(crate) custody: Option<Arc<dyn CustodyNotices>>,
    pub(crate) dead_letters: Arc<dyn DeadLetterSink>,
    pub(crate) acked: Arc<dyn AckedFates>,
    pub(crate) time: Arc<dyn TimeSource>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) heat: Arc<Heat>,
    pub(crate) control: watch::Receiver<Control>,
    pub(crate) status: watch::Sender<SpoutStatus>,
    /// The topology's budgets and breakers (one for all its spout tasks).
    pub(crate) gate: Arc<crate::adaptive::RetryGate>,
}

pub(crate) struct SpoutTask<S: Spout> {
    spout: S,
    p: SpoutParts,
    dl_tx: mpsc::Sender<DeadLetter>,
    dl_done: mpsc::Receiver<Vec<Stored>>,
    dl_outbox: Vec<DeadLetter>,
    dl_in_flight: usize,
    pending: PendingTable,
    /// The origin of `InFlight::emitted_at`.
    epoch: Instant,
    /// Wakes the task when the queue is filled from outside (see `RetryQueue::notifier`).
    queue_notify: Option<Arc<tokio::sync::Notify>>,
    source: Source,
    mixer: Mixer,
    /// Due retries the budgets and breakers hold back.
    gating: Gating,
    /// Ordered keys, when the topology orders any.
    lines: Option<Box<KeyLines>>,
    notices: Vec<KeyNotice>,
    /// Messages retained since the last pass, for [`Spout::retained`].
    retained: Vec<MessageId>,
    /// Messages whose first retry is queued and which have neither custody nor a fate yet:
    /// the spout hears `retained` once, and not after a fate.
    awaiting: hashbrown::HashSet<MessageId>,
    stall: StallWatch,
    // Published to the shared stats once per pass.
    emitted: u64,
    new_messages: u64,
    acked: u64,
    acked_by_attempt: [u64; ACKED_ATTEMPTS],
    latency: Histogram,
    /// How long each fate waited between the acker and this task.
    ack_wait: Histogram,
    /// How much later than its due time each retry fired.
    lateness: Histogram,
    published_pending: usize,
    published_queue: usize,
    published_next_due: Option<Timestamp>,
    published_fuse: bool,
    /// Held messages and blocked keys, as last published.
    published_lines: (usize, usize),
}

enum Event {
    Fates(Fates),
    Stored(Vec<Stored>),
    Control,
    Timer,
}

impl<S: Spout> SpoutTask<S> {
    pub(crate) fn new(spout: S, p: SpoutParts) -> (Self, DeadLetterBatcher) {
        // Dead letters being stored count as pending, so these channels never fill up.
        let (writer, dl_tx, dl_done) =
            DeadLetterBatcher::new(p.dead_letters.clone(), p.cfg.max_spout_pending + 1);
        let now = p.time.now();
        let queue_notify = p.queue.notifier();
        let task = SpoutTask {
            spout,
            queue_notify,
            dl_tx,
            dl_done,
            dl_outbox: Vec::new(),
            dl_in_flight: 0,
            pending: PendingTable::new(),
            epoch: now,
            source: Source::Open,
            mixer: Mixer::new(p.cfg.retry_mix),
            gating: Gating::new(p.gate.clone()),
            lines: KeyLines::new(&p.cfg.ordering, p.cfg.max_spout_pending),
            notices: Vec::new(),
            retained: Vec::new(),
            awaiting: hashbrown::HashSet::new(),
            stall: StallWatch::default(),
            emitted: 0,
            new_messages: 0,
            acked: 0,
            acked_by_attempt: [0; ACKED_ATTEMPTS],
            latency: Histogram::default(),
            ack_wait: Histogram::default(),
            lateness: Histogram::default(),
            published_pending: 0,
            published_queue: 0,
            published_next_due: None,
            published_fuse: false,
            published_lines: (0, 0),
            p,
        };
        (task, writer)
    }

    /// `t` in nanoseconds since the task's epoch.
    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.dl_in_flight
    }

    pub(crate) async fn run(mut self) {
        loop {
            let now = self.p.time.now();
            let mut progressed = false;
            for _ in 0..64 {
                let Ok(fates) = self.p.fates.try_recv() else {
                    break;
                };
                progressed = true;
                self.on_fates(fates, now);
            }
            while let Ok(ids) = self.dl_done.try_recv() {
                progressed = true;
                self.on_stored(ids, now);
            }
            if let Some(custody) = &self.p.custody {
                custody.take(&mut self.retained);
            }
            for id in std::mem::take(&mut self.retained) {
                progressed = true;
                if self.awaiting.remove(&id) {
                    self.tell_spout(|s| s.retained(&id));
                }
            }
            if let Some(lines) = &mut self.lines {
                if let Some(notices) = &self.p.notices {
                    notices.take(&mut self.notices);
                }
                for n in self.notices.drain(..) {
                    progressed = true;
                    lines.notice(n, now);
                }
            }
            let control = *self.p.control.borrow();
            if control == Control::Stop {
                break;
            }
            if control == Control::Run {
                progressed |= self.emit(now) > 0;
            }
            for dl in self.dl_outbox.drain(..) {
                let _ = self.dl_tx.send(dl).await;
            }
            self.p.outbox.flush().await;
            self.publish(now);
            self.watch_stall(now, control);
            if control == Control::Drain && self.in_flight() == 0 {
                break;
            }
            if !progressed {
                match self.wait(control).await {
                    Event::Fates(fates) => {
                        let now = self.p.time.now();
                        self.on_fates(fates, now);
                    }
                    Event::Stored(ids) => self.on_stored(ids, self.p.time.now()),
                    Event::Control | Event::Timer => {}
                }
            }
        }
        self.finish().await;
    }

    /// Sleeps until something can be done: a fate, a stored dead letter, a control change, a
    /// retry coming due (or the fuse possibly closing), time to ask an idle spout again, or
    /// (at the limit) time to check for a stall.
    async fn wait(&mut self, control: Control) -> Event {
        let now = self.p.time.now();
        let mut wake: Option<Instant> = None;
        let mut at = |t: Instant| wake = Some(wake.map_or(t, |w| w.min(t)));
        if let Some(t) = self.stall.next_check() {
            at(t);
        }
        let fuse = self.p.gate.fuse(now);
        if fuse.open {
            // Its state moves on with time alone: look again, so that it is published.
            at(now + gating::HOLD_TICK);
        }
        if control == Control::Run && self.in_flight() < self.p.cfg.max_spout_pending {
            if self.source == Source::Idle {
                at(now + self.p.cfg.spout_idle_wait);
            }
            if (!self.p.queue.is_empty() || self.gating.held() > 0) && !fuse.holding {
                if let Some(due) = self.p.queue.next_due() {
                    at(due);
                }
                if let Some(t) = self.gating.next_check(now) {
                    at(t);
                }
            }
        }
        let sleep = async {
            match wake {
                Some(t) => tokio::time::sleep_until(t.max(now)).await,
                None => std::future::pending().await,
            }
        };
        let filled = async {
            match &self.queue_notify {
                Some(n) => n.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = self.p.control.changed() => {
                if changed.is_err() {
                    // The topology handle was dropped: stop.
                    self.p.control = watch::channel(Control::Stop).1;
                }
                Event::Control
            }
            Some(batch) = self.p.fates.recv() => Event::Fates(batch),
            Some(ids) = self.dl_done.recv() => Event::Stored(ids),
            () = sleep => Event::Timer,
            () = filled => Event::Timer,
        }
    }

    /// A batch of fates from the acker: how long each waited since the acker sent it, then
    /// each fate.
    fn on_fates(&mut self, (sent, batch): Fates, now: Instant) {
        let waited = crate::time::now().saturating_duration_since(sent);
        self.ack_wait.observe_times(waited, batch.len() as u64);
        self.on_terminals(batch, now);
    }

    fn on_terminals(&mut self, batch: Vec<Terminal>, now: Instant) {
        let mut acked = 0;
        let now_nanos = self.nanos(now);
        // Wall time for the acked fates, read once per batch of terminals.
        let mut wall = None;
        for t in batch {
            // The first fate of a root wins; anything later finds no entry and is ignored.
            let Some(flight) = self.pending.remove(t.root()) else {
                continue;
            };
            self.stall.finished(
                matches!(&t, Terminal::Failed { failure, .. } if failure.code == codes::TIMEOUT),
            );
            match t {
                Terminal::Acked { .. } => {
                    acked += 1;
                    let latency = now_nanos.saturating_sub(flight.emitted_at);
                    self.latency.observe(Duration::from_nanos(latency));
                    self.count_ack(&flight.msg);
                    self.gating
                        .finished(self.p.policy.as_ref(), &flight.msg, None, now);
                    // Recorded before the spout hears it: a source's position that covers
                    // the message is then queued after its fate.
                    let at = *wall.get_or_insert_with(|| self.p.time.wall());
                    self.p.acked.acked(&flight.msg, at);
                    self.settled(&flight.msg.id);
                    self.tell_spout(|s| s.ack(&flight.msg.id));
                    if let (Some(lines), Some(line)) = (&mut self.lines, flight.line) {
                        lines.acked(line, now);
                    }
                }
                Terminal::Failed { failure, .. } => {
                    // Recorded before deciding, so the policy sees this failure in the rate.
                    self.p.gate.fuse_finished(0, 1, now);
                    self.p.stats.failure(&failure.code);
                    self.gating
                        .finished(self.p.policy.as_ref(), &flight.msg, Some(&failure), now);
                    self.decide(flight.msg, flight.line, *failure, now);
                }
            }
        }
        if acked > 0 {
            self.p.gate.fuse_finished(acked, 0, now);
        }
    }

    /// The runtime's state as a failure of `msg` sees it (heat counts this failure).
    fn signals(&self, msg: &Message, failure: &Failure, now: Instant) -> Signals {
        let fuse = self.p.gate.fuse(now);
        let (biz, code, policy) = (&*msg.biz, &*failure.code, &*self.p.policy);
        let (heat, heat_total) =
            guarded(|| adaptive::heat_of_failure(&self.p.heat, policy, biz, code, now))
                .unwrap_or_else(|p| {
                    tracing::error!(id = %msg.id, panic = %p.message, at = p.at(), "failure policy panicked weighing heat");
                    (0.0, 0.0)
                });
        let mut scope = FailureContext::new(biz, code, msg.retry.attempt);
        scope.attrs = &failure.attrs;
        Signals {
            fail_rate: fuse.fail_rate,
            retry_queue_depth: (self.p.queue.len() + self.gating.held()) as u64,
            pending: self.in_flight() as u64,
            fuse_open: fuse.open,
            heat,
            heat_total,
            breaker_open: self.gating.breaker_open(policy, &scope, heat, now),
        }
    }

    /// Asks the judge for the failed message's fate and routes it: a retry to the queue, a
    /// dead letter to the sink.
    fn decide(&mut self, msg: Message, line: Option<LineKey>, failure: Failure, now: Instant) {
        let signals = self.signals(&msg, &failure, now);
        let case = Case {
            message: msg,
            failure,
            signals,
            now,
            wall: self.p.time.wall(),
        };
        match judge(case, self.p.policy.as_ref(), &self.p.gate) {
            Verdict::Retry(retry) => {
                let (msg, record) = (&retry.message, retry.record());
                let delay_ms = retry.delay.as_millis() as u64;
                // Each retry is one `info` line, its facts as fields (so `--log-format json`
                // gives them as keys), outside the span so that text logs say them once.
                tracing::info!(
                    id = %msg.id, attempt = msg.retry.attempt, rule = %record.rule,
                    code = %record.code, delay_ms, version = %record.version, "retry scheduled"
                );
                // One span per retry: the scheduling (and a durable queue's write) runs in it.
                let span = tracing::info_span!("retry", id = %msg.id, rule = %record.rule);
                let _entered = span.enter();
                self.p.stats.retry(record.rule.as_str());
                self.p.stats.retry_delay(retry.delay);
                // A retry its key's later messages wait for comes back to this task.
                match (&mut self.lines, line) {
                    (Some(lines), Some(line)) => {
                        lines.retrying(line, &retry.message.id);
                        self.p.queue.schedule_local(retry.due, retry.message);
                    }
                    _ => {
                        // Its first retry: the store's commit of it will be its custody.
                        if self.p.custody.is_some() && retry.message.retry.attempt == 1 {
                            self.awaiting.insert(retry.message.id.clone());
                        }
                        self.p.queue.schedule(retry.due, retry.message)
                    }
                }
            }
            Verdict::DeadLetter(letter) => {
                tracing::info!(
                    id = %letter.message.id, label = %letter.label, reason = %letter.reason,
                    rule = %letter.rule, attempt = letter.message.retry.attempt,
                    code = %letter.failure.code, "dead letter"
                );
                self.dl_in_flight += 1;
                self.dl_outbox.push(letter);
            }
        }
    }

    fn on_stored(&mut self, ids: Vec<Stored>, now: Instant) {
        for (id, label, key) in ids {
            self.dl_in_flight -= 1;
            self.stall.freed();
            self.p.stats.dead_letter(label.as_str());
            self.settled(&id);
            self.tell_spout(|s| s.dead_lettered(&id));
            if let (Some(lines), Some((key, biz))) = (&mut self.lines, &key) {
                lines.dead_lettered(key, biz, &id, now);
            }
        }
    }

    /// `id` has its fate: custody came with it, so no `retained` follows.
    fn settled(&mut self, id: &MessageId) {
        if !self.awaiting.is_empty() {
            self.awaiting.remove(id);
        }
    }

    fn tell_spout(&mut self, f: impl FnOnce(&mut S)) {
        if let Err(p) = guarded(|| f(&mut self.spout)) {
            tracing::error!(panic = %p.message, at = p.at(), "spout panicked while told a fate");
        }
    }
}
