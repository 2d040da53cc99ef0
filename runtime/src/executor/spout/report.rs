//! What a spout task tells: its counters and gauges, published to the shared stats once per
//! pass (and only what moved), its stalls (see `stall`) as log lines, and what it left
//! behind when it stops.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tokio::time::Instant;

use super::{Source, SpoutTask};
use crate::executor::stall::{Change, STALL_AFTER};
use crate::executor::{Control, SpoutStatus};
use crate::stats::ACKED_ATTEMPTS;
use crate::topology::{Message, Spout};

impl<S: Spout> SpoutTask<S> {
    /// Counts an acked message, and the attempt that succeeded.
    pub(super) fn count_ack(&mut self, msg: &Message) {
        self.acked += 1;
        let attempt = (msg.retry.attempt.max(1) as usize).min(ACKED_ATTEMPTS);
        self.acked_by_attempt[attempt - 1] += 1;
        self.p.policy.observe(msg, crate::release::Observed::Acked);
    }

    pub(super) fn publish(&mut self, now: Instant) {
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
        stats.merge_ack_wait(&mut self.ack_wait);
        stats.merge_lateness(&mut self.lateness);
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
    pub(super) fn watch_stall(&mut self, now: Instant, control: Control) {
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

    pub(super) async fn finish(mut self) {
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
