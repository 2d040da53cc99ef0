//! The spout task's delivering side: each pass it emits up to `batch_size` deliveries under
//! `max_spout_pending`, taking turns (see `fairness`) between due retries (those the gate
//! lets fire, while the fuse does not hold them) and new messages (a key's released ones
//! first, then the spout's), and holds back those an ordered key makes wait.

use tokio::time::Instant;

use super::{Source, SpoutTask};
use crate::executor::guarded;
use crate::executor::ordering::LineKey;
use crate::executor::pending::{InFlight, SLOT_MASK};
use crate::fairness::Turn;
use crate::fate::judge;
use crate::release::Observed;
use crate::time::Timestamp;
use crate::topology::{Failure, Message, NextMessage, Spout, Value, Values, codes};

impl<S: Spout> SpoutTask<S> {
    pub(super) fn emit(&mut self, now: Instant) -> usize {
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
        loop {
            if self.source != Source::Open
                || self.lines.as_ref().is_some_and(|l| l.full())
                || self.in_flight() >= self.p.cfg.max_spout_pending
            {
                return None;
            }
            match guarded(|| self.spout.next()) {
                Ok(NextMessage::Ready(m)) if m.payload.len() > self.p.cfg.max_payload => {
                    let why = format!(
                        "the payload is {} bytes, above max_payload ({} bytes)",
                        m.payload.len(),
                        self.p.cfg.max_payload
                    );
                    self.refused(m, Failure::new(codes::PAYLOAD_TOO_LARGE, why));
                }
                Ok(NextMessage::Ready(m)) => return Some(m),
                Ok(NextMessage::Refused(m, failure)) => self.refused(m, failure),
                Ok(NextMessage::Idle) => {
                    self.source = Source::Idle;
                    return None;
                }
                Ok(NextMessage::Exhausted) => {
                    self.source = Source::Exhausted;
                    return None;
                }
                Err(p) => {
                    tracing::error!(panic = %p.message, at = p.at(), "spout panicked in next(); asking again later");
                    self.source = Source::Idle;
                    return None;
                }
            }
        }
    }

    /// A message the spout refused (or one too large to hand out): dead-lettered at once,
    /// undelivered (its slot under `max_spout_pending` is held until the letter is stored).
    fn refused(&mut self, msg: Message, failure: Failure) {
        let letter = judge::refuse(msg, failure, self.p.policy.as_ref(), self.p.time.wall());
        tracing::info!(
            id = %letter.message.id, label = %letter.label, code = %letter.failure.code,
            "dead letter (refused by its source)"
        );
        self.new_messages += 1;
        self.p.stats.failure(&letter.failure.code);
        self.dl_in_flight += 1;
        self.dl_outbox.push(letter);
    }

    fn deliver(&mut self, mut msg: Message, line: Option<LineKey>, at: u64, wall: Timestamp) {
        match msg.retry.last_failure() {
            _ if msg.retry.attempt == 0 => self.new_messages += 1,
            Some(last) => {
                self.p.stats.retry_fired(last.rule.as_str());
                // Due when its failure was decided plus its delay (an operator's "retry now"
                // fires early: no lateness).
                if let Some(delay) = last.delay {
                    let due = last.at.saturating_add(delay);
                    self.lateness.observe(wall - due);
                }
            }
            // Delivered before but never retried by a rule: nothing fired it.
            None => {}
        }
        msg.retry.attempt += 1;
        self.p.policy.observe(&msg, Observed::Delivered);
        let first = *msg.retry.first_delivery.get_or_insert(wall);
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
            msg.key
                .as_ref()
                .map_or(Value::Null, |k| Value::Str(k.shared())),
            Value::Int(i64::try_from(first.as_millis()).unwrap_or(i64::MAX)),
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
}
