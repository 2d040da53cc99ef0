//! The order spout: hands out orders `1..=N` (or forever), skipping those that already have a
//! fate or wait in the retry queue, and records each fate it is told in the source position
//! (the low-water mark). The spout task records the acked fates itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::time::Instant;

use super::orders::{OrderGen, position_of};
use rebound_runtime::durable::{Journal, SourcePosition};
use rebound_runtime::topology::{MessageId, NextMessage, Spout};

/// Above this many writes waiting in the journal, the spout pauses (says `Idle`): the disk sets
/// the pace instead of the journal's memory growing.
pub(crate) const BACKLOG_LIMIT: usize = 64 * 1024;

/// What the spout shares with the outside while it runs.
#[derive(Debug, Default)]
pub struct Live {
    /// Orders (of this run) with a fate, including those known at start.
    pub settled: AtomicU64,
    /// The highest order number handed out.
    pub high: AtomicU64,
    /// Orders acked in this session.
    pub acked: AtomicU64,
    /// Orders dead-lettered in this session.
    pub dead_lettered: AtomicU64,
    /// Deliveries the order sink absorbed as duplicates in this session (the order was
    /// written before): what `rebound_duplicates_total` reports.
    pub duplicates: Arc<AtomicU64>,
}

/// Paces new orders at a fixed rate (for a long-running `serve`): by `t` seconds after its
/// start, at most `floor(t × rate) + 1` orders.
#[derive(Debug)]
pub(crate) struct Pacer {
    per_second: f64,
    started: Instant,
    handed: u64,
}

impl Pacer {
    pub(crate) fn new(per_second: f64, now: Instant) -> Pacer {
        Pacer {
            per_second,
            started: now,
            handed: 0,
        }
    }

    /// True if one more order may go now.
    pub(crate) fn ready(&self) -> bool {
        let allowed = self.started.elapsed().as_secs_f64() * self.per_second;
        (self.handed as f64) < allowed.floor() + 1.0
    }

    /// One order went.
    pub(crate) fn handed_one(&mut self) {
        self.handed += 1;
    }
}

pub(crate) struct OrderSpout {
    pub(crate) orders: OrderGen,
    pub(crate) next: u64,
    pub(crate) end: Option<u64>,
    pub(crate) position: SourcePosition,
    pub(crate) journal: Journal,
    pub(crate) live: Arc<Live>,
    pub(crate) pacer: Option<Pacer>,
}

impl OrderSpout {
    fn settled(&mut self, n: u64) {
        self.position.settled(n);
        let settled = self.position.committed() + self.position.settled_above();
        self.live.settled.store(settled, Relaxed);
    }
}

impl Spout for OrderSpout {
    fn next(&mut self) -> NextMessage {
        if self.journal.backlog() > BACKLOG_LIMIT {
            return NextMessage::Idle;
        }
        if self.pacer.as_ref().is_some_and(|p| !p.ready()) {
            return NextMessage::Idle;
        }
        let n = loop {
            let n = self.next;
            if self.end.is_some_and(|end| n > end) {
                return NextMessage::Exhausted;
            }
            self.next += 1;
            if !self.position.should_skip(n) {
                break n;
            }
        };
        if let Some(p) = &mut self.pacer {
            p.handed_one();
        }
        self.position.handing_out(n);
        self.live.high.fetch_max(n, Relaxed);
        NextMessage::Ready(self.orders.message(n))
    }

    fn ack(&mut self, id: &MessageId) {
        // The spout task queued the acked fate already, before this call: the position that
        // covers it follows it through the journal.
        self.live.acked.fetch_add(1, Relaxed);
        if let Some(n) = position_of(id.as_str()) {
            self.settled(n);
        }
    }

    fn dead_lettered(&mut self, id: &MessageId) {
        // The dead letter (and with it the fate) is committed already.
        self.live.dead_lettered.fetch_add(1, Relaxed);
        if let Some(n) = position_of(id.as_str()) {
            self.settled(n);
        }
    }

    fn close(&mut self) {
        self.position.sync();
    }
}
