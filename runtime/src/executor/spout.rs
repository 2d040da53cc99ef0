//! The spout task: emits deliveries (new messages mixed with due retries) under
//! `max_spout_pending`, and turns each tree's terminal into the message's fate — `ack`, a
//! retry, or a dead letter. It also reports when it stalls at its limit (see `stall`), and
//! holds back the later messages of an ordered key (see `ordering`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::gating::{self, Gating};
use super::{Control, SpoutStatus, guarded};
use crate::acker::Terminal;
use crate::adaptive::{self, Heat};
use crate::fairness::{Mixer, Turn};
use rebound_engine::SignalView;

use crate::fate::{
    AckedFates, DeadLetter, DeadLetterSink, Decided, Decision, FailureContext, FailurePolicy,
    GiveUpReason, KeyNotice, Label, MAX_RETRY_DELAY, RetryQueue, RuleRef, Signals, Version,
};
use crate::stats::{ACKED_ATTEMPTS, Histogram, Stats};
use crate::time::{TimeSource, Timestamp};
use crate::topology::{
    Config, Failure, FailureRecord, Message, NextMessage, Spout, Value, Values, codes,
};

use super::dead_letters::{DeadLetterBatcher, Stored};
use super::ordering::{KeyLines, LineKey};
use super::outbox::Outbox;
use super::pending::{InFlight, PendingTable, SLOT_MASK};
use super::stall::{Change, STALL_AFTER, StallWatch};

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
    pub(crate) fates: mpsc::Receiver<Vec<Terminal>>,
    pub(crate) policy: Arc<dyn FailurePolicy>,
    pub(crate) queue: Box<dyn RetryQueue>,
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
    stall: StallWatch,
    // Published to the shared stats once per pass.
    emitted: u64,
    new_messages: u64,
    acked: u64,
    acked_by_attempt: [u64; ACKED_ATTEMPTS],
    latency: Histogram,
    published_pending: usize,
    published_queue: usize,
    published_next_due: Option<Timestamp>,
    published_fuse: bool,
    /// Held messages and blocked keys, as last published.
    published_lines: (usize, usize),
}

enum Event {
    Fates(Vec<Terminal>),
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
            stall: StallWatch::default(),
            emitted: 0,
            new_messages: 0,
            acked: 0,
            acked_by_attempt: [0; ACKED_ATTEMPTS],
            latency: Histogram::default(),
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
                let Ok(batch) = self.p.fates.try_recv() else {
                    break;
                };
                progressed = true;
                self.on_terminals(batch, now);
            }
            while let Ok(ids) = self.dl_done.try_recv() {
                progressed = true;
                self.on_stored(ids, now);
            }
            if let Some(lines) = &mut self.lines {
                self.p.queue.take_key_notices(&mut self.notices);
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
                    Event::Fates(batch) => {
                        let now = self.p.time.now();
                        self.on_terminals(batch, now);
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

    fn emit(&mut self, now: Instant) -> usize {
        if self.source == Source::Idle {
            self.source = Source::Open;
        }
        let retries_allowed = !self.p.gate.fuse(now).holding;
        let wall = self.p.time.wall();
        let at = self.nanos(now);
        let mut n = 0;
        while n < self.p.cfg.batch_size && self.in_flight() < self.p.cfg.max_spout_pending {
            let mut next = None;
            for turn in self.mixer.order() {
                let msg = match turn {
                    Turn::Retry if retries_allowed => self.next_retry(now),
                    Turn::Retry => None,
                    Turn::New => self.next_new(now),
                };
                if let Some(msg) = msg {
                    self.mixer.took(turn);
                    next = Some(msg);
                    break;
                }
            }
            let Some((msg, line)) = next else { break };
            if msg.retry.attempt == 0 {
                self.gating
                    .first_delivery(self.p.policy.as_ref(), &msg, now);
            }
            self.deliver(msg, line, at, wall);
            n += 1;
        }
        n
    }

    /// A due retry to deliver, with its key's line (one its key holds back waits in the line
    /// instead).
    fn next_retry(&mut self, now: Instant) -> Option<(Message, Option<LineKey>)> {
        loop {
            let m = self
                .gating
                .pop_due(self.p.policy.as_ref(), self.p.queue.as_mut(), now)?;
            let Some(lines) = &mut self.lines else {
                return Some((m, None));
            };
            match lines.admits(&m) {
                Ok(line) => return Some((m, line)),
                Err(_) => lines.hold(m, now),
            }
        }
    }

    /// A new message to deliver, with its key's line: one its key let go first, then the
    /// spout's (one its key holds back waits in the line; at `max_held` the spout is not asked).
    fn next_new(&mut self, now: Instant) -> Option<(Message, Option<LineKey>)> {
        if let Some(lines) = &mut self.lines
            && let Some((m, line)) = lines.pop_ready()
        {
            return Some((m, Some(line)));
        }
        loop {
            let m = self.next_from_spout()?;
            let Some(lines) = &mut self.lines else {
                return Some((m, None));
            };
            match lines.admits(&m) {
                Ok(line) => return Some((m, line)),
                Err(_) => lines.hold(m, now),
            }
        }
    }

    fn next_from_spout(&mut self) -> Option<Message> {
        if self.source != Source::Open || self.lines.as_ref().is_some_and(|l| l.full()) {
            return None;
        }
        match guarded(|| self.spout.next()) {
            Ok(NextMessage::Ready(m)) => Some(m),
            Ok(NextMessage::Idle) => {
                self.source = Source::Idle;
                None
            }
            Ok(NextMessage::Exhausted) => {
                self.source = Source::Exhausted;
                None
            }
            Err(p) => {
                tracing::error!(panic = %p.message, at = p.at(), "spout panicked in next(); asking again later");
                self.source = Source::Idle;
                None
            }
        }
    }

    fn deliver(&mut self, mut msg: Message, line: Option<LineKey>, at: u64, wall: Timestamp) {
        match msg.retry.last_failure() {
            _ if msg.retry.attempt == 0 => self.new_messages += 1,
            Some(last) => self.p.stats.retry_fired(last.rule.as_str()),
            // Delivered before but never retried by a rule: nothing fired it.
            None => {}
        }
        msg.retry.attempt += 1;
        msg.retry.first_delivery.get_or_insert(wall);
        let slot = self.pending.next_slot();
        let root = loop {
            let id = (self.p.outbox.random_id() & !SLOT_MASK) | slot;
            if id != 0 {
                break id;
            }
        };
        let values = Values::from((
            Value::Str(msg.id.shared()),
            Value::Str(msg.biz.clone()),
            Value::Bytes(msg.payload.clone()),
            Value::Map(msg.headers.clone()),
            Value::Int(msg.retry.attempt.into()),
        ));
        let xor = self.p.outbox.emit_root(values, root);
        self.emitted += 1;
        if xor == 0 {
            // No bolt subscribes: the tree is complete as soon as it exists.
            self.count_ack(&msg);
            self.p.acked.acked(&msg, wall);
            self.tell_spout(|s| s.ack(&msg.id));
            if let (Some(lines), Some(line)) = (&mut self.lines, line) {
                lines.acked(line, self.p.time.now());
            }
            return;
        }
        self.p.outbox.init(root, xor, self.p.global);
        self.pending.insert(InFlight {
            root,
            msg,
            line,
            emitted_at: at,
        });
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

    /// Counts an acked message, and the attempt that succeeded.
    fn count_ack(&mut self, msg: &Message) {
        self.acked += 1;
        let attempt = (msg.retry.attempt.max(1) as usize).min(ACKED_ATTEMPTS);
        self.acked_by_attempt[attempt - 1] += 1;
    }

    fn decide(&mut self, mut msg: Message, line: Option<LineKey>, failure: Failure, now: Instant) {
        let fuse = self.p.gate.fuse(now);
        let (biz, code, policy) = (&*msg.biz, &*failure.code, &*self.p.policy);
        let (heat, heat_total) =
            guarded(|| adaptive::heat_of_failure(&self.p.heat, policy, biz, code, now))
                .unwrap_or_else(|p| {
                    tracing::error!(id = %msg.id, panic = %p.message, at = p.at(), "failure policy panicked weighing heat");
                    (0.0, 0.0)
                });
        let breaker_open = {
            let mut scope = FailureContext::new(biz, code, msg.retry.attempt);
            scope.attrs = &failure.attrs;
            self.gating.breaker_open(policy, &scope, now)
        };
        // On the stack: the decision borrows them, nothing is copied.
        let signals = Signals {
            fail_rate: fuse.fail_rate,
            retry_queue_depth: (self.p.queue.len() + self.gating.held()) as u64,
            pending: self.in_flight() as u64,
            fuse_open: fuse.open,
            heat,
            heat_total,
            breaker_open,
        }
        .named();
        let wall = self.p.time.wall();
        let elapsed = msg
            .retry
            .first_delivery
            .map_or(Duration::ZERO, |first| wall - first);
        let ctx = FailureContext {
            biz: &msg.biz,
            code: &failure.code,
            attempt: msg.retry.attempt,
            redrives: msg.retry.redrives,
            elapsed,
            retry_after: failure.retry_after,
            last_delay: msg.retry.last_delay(),
            attrs: &failure.attrs,
            headers: msg.headers.view(),
            now: wall.as_millis(),
            signals: SignalView::Pairs(&signals),
        };
        let decided = guarded(|| self.p.policy.decide(&ctx))
            .unwrap_or_else(|p| {
                tracing::error!(id = %msg.id, panic = %p.message, at = p.at(), "failure policy panicked; dead-lettering");
                Decided {
                    decision: Decision::DeadLetter {
                        label: Label::from("POLICY_ERROR"),
                        reason: GiveUpReason::PolicyError,
                        rule: RuleRef::Rule("none".into()),
                    },
                    version: Version::from_hash(0),
                }
            });
        let version = decided.version;
        // A retry its budget has no room for, and that says `dead_letter`, ends here.
        let decision = match decided.decision {
            Decision::Retry { rule, .. }
                if !self.gating.retry_allowed(self.p.policy.as_ref(), &ctx, now) =>
            {
                Decision::DeadLetter {
                    label: Gating::label_of(self.p.policy.as_ref(), &rule)
                        .unwrap_or_else(|| Label::from("default")),
                    reason: GiveUpReason::Budget,
                    rule,
                }
            }
            decision => decision,
        };
        match decision {
            Decision::Retry { delay, rule } => {
                // Saturate here, once: the due instant, the stored due time and the stored
                // delay are all computed from this.
                let delay = delay.min(MAX_RETRY_DELAY);
                let delay_ms = delay.as_millis() as u64;
                // Each retry is one `info` line, its facts as fields (so `--log-format json`
                // gives them as keys), outside the span so that text logs say them once.
                tracing::info!(
                    id = %msg.id, attempt = msg.retry.attempt, rule = %rule,
                    code = %failure.code, delay_ms, version = %version, "retry scheduled"
                );
                // One span per retry: the scheduling (and a durable queue's write) runs in it.
                let span = tracing::info_span!("retry", id = %msg.id, rule = %rule);
                let _entered = span.enter();
                self.p.stats.retry(rule.as_str());
                self.p.stats.retry_delay(delay);
                msg.retry.failures.push(FailureRecord {
                    attempt: msg.retry.attempt,
                    at: wall,
                    code: failure.code,
                    message: failure.message,
                    attrs: failure.attrs,
                    rule,
                    version,
                    delay: Some(delay),
                });
                // An Instant that cannot reach that far (not Linux's) waits a century instead.
                let due = now
                    .checked_add(delay)
                    .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
                // A retry its key's later messages wait for comes back to this task.
                match (&mut self.lines, line) {
                    (Some(lines), Some(line)) => {
                        lines.retrying(line, &msg.id);
                        self.p.queue.schedule_local(due, msg);
                    }
                    _ => self.p.queue.schedule(due, msg),
                }
            }
            Decision::DeadLetter {
                label,
                reason,
                rule,
            } => {
                tracing::info!(
                    id = %msg.id, label = %label, reason = %reason, rule = %rule,
                    attempt = msg.retry.attempt, code = %failure.code, "dead letter"
                );
                self.dl_in_flight += 1;
                self.dl_outbox.push(DeadLetter {
                    message: msg,
                    failure,
                    label,
                    reason,
                    rule,
                    version,
                    at: wall,
                });
            }
        }
    }

    fn on_stored(&mut self, ids: Vec<Stored>, now: Instant) {
        for (id, label, key) in ids {
            self.dl_in_flight -= 1;
            self.stall.freed();
            self.p.stats.dead_letter(label.as_str());
            self.tell_spout(|s| s.dead_lettered(&id));
            if let (Some(lines), Some((key, biz))) = (&mut self.lines, &key) {
                lines.dead_lettered(key, biz, &id, now);
            }
        }
    }

    fn tell_spout(&mut self, f: impl FnOnce(&mut S)) {
        if let Err(p) = guarded(|| f(&mut self.spout)) {
            tracing::error!(panic = %p.message, at = p.at(), "spout panicked while told a fate");
        }
    }

    fn publish(&mut self, now: Instant) {
        let stats = &self.p.stats;
        if self.emitted > 0 {
            stats.add_emitted(std::mem::take(&mut self.emitted));
        }
        if self.new_messages > 0 {
            stats.add_new_messages(std::mem::take(&mut self.new_messages));
        }
        if self.acked > 0 {
            stats.add_acked(std::mem::take(&mut self.acked));
            stats.add_acked_by_attempt(&mut self.acked_by_attempt);
        }
        stats.merge_latency(&mut self.latency);
        let in_flight = self.in_flight();
        if in_flight != self.published_pending {
            stats.add_pending(in_flight as i64 - self.published_pending as i64);
            stats.note_task_pending(in_flight as u64);
            self.published_pending = in_flight;
        }
        let queued = self.p.queue.len() + self.gating.held();
        let waiting = match &mut self.lines {
            Some(lines) => lines.publish(stats, &mut self.published_lines),
            None => 0,
        };
        if queued != self.published_queue {
            stats.add_retry_queue_depth(queued as i64 - self.published_queue as i64);
            self.published_queue = queued;
        }
        // When the next retry is due, for a progress view: told again only when it moves by
        // more than a tenth of a second, or appears or goes.
        let next = self
            .p
            .queue
            .next_due()
            .map(|due| self.p.time.wall() + due.saturating_duration_since(now));
        let moved = match (next, self.published_next_due) {
            (Some(a), Some(b)) => a.as_millis().abs_diff(b.as_millis()) > 100,
            (a, b) => a.is_some() != b.is_some(),
        };
        if moved {
            stats.set_next_retry_due(self.p.global as usize, next);
            self.published_next_due = next;
        }
        let fuse = self.p.gate.fuse(now).open;
        if fuse != self.published_fuse {
            stats.add_fuse_open(if fuse { 1 } else { -1 });
            self.published_fuse = fuse;
        }
        let status = SpoutStatus {
            exhausted: self.source == Source::Exhausted,
            in_flight,
            // Held messages are work still to do: not quiescent while any waits.
            queued: queued + waiting,
            exited: false,
        };
        self.p.status.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }

    /// Counts and logs stalls: running at `max_spout_pending` with no tree finished for
    /// [`STALL_AFTER`].
    fn watch_stall(&mut self, now: Instant, control: Control) {
        let limit = self.p.cfg.max_spout_pending;
        let in_flight = self.in_flight();
        let full = control == Control::Run && in_flight >= limit;
        let (stalled, change) = self.stall.check(now, full);
        let stats = &self.p.stats;
        stats.add_stalled(stalled);
        match change {
            Change::None => {}
            Change::Began { .. } => {
                stats.add_stalled_tasks(1);
                tracing::warn!(
                    task = self.p.global,
                    in_flight,
                    max_spout_pending = limit,
                    retry_queue = self.p.queue.len(),
                    message_timeout_ms = self.p.cfg.message_timeout.as_millis() as u64,
                    "spout stalled: every max_spout_pending slot holds a tree and none finished \
                     for {STALL_AFTER:?}; new messages and due retries wait until trees finish or \
                     time out (a tree that times out holds its slot for up to 1.5 × \
                     message_timeout, so max_spout_pending must exceed their rate × that)"
                );
            }
            Change::Ended {
                since,
                finished,
                timed_out,
            } => {
                stats.add_stalled_tasks(-1);
                tracing::info!(
                    task = self.p.global,
                    stalled_ms = (now - since).as_millis() as u64,
                    finished,
                    timed_out,
                    "spout no longer stalled"
                );
            }
        }
    }

    async fn finish(mut self) {
        self.p.queue.flush().await;
        let _ = catch_unwind(AssertUnwindSafe(|| self.spout.close()));
        let now = self.p.time.now();
        self.publish(now);
        self.watch_stall(now, Control::Stop);
        if self.published_fuse {
            self.p.stats.add_fuse_open(-1);
        }
        if let Some(lines) = &self.lines {
            let waiting = lines.waiting();
            if waiting > 0 {
                tracing::info!(
                    waiting,
                    "spout task stopped with messages held behind their keys; the source hands them out again"
                );
            }
            let (held, blocked) = self.published_lines;
            self.p.stats.add_ordered(-(held as i64), -(blocked as i64));
        }
        let in_flight = self.in_flight();
        if in_flight > 0 {
            tracing::warn!(
                in_flight,
                "spout task stopped with trees in flight; their messages were not acked and will be redelivered by the source"
            );
        }
        self.p.status.send_modify(|s| s.exited = true);
    }
}
