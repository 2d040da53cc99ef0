//! The order spout of a fleet: the orders split into [`PARTITIONS`] partitions (order number
//! mod 16), of which this node emits those it owns. Which it owns, and which fates other
//! nodes wrote for its partitions, it hears from the keeper (`keeper.rs`) through [`Desk`].
//!
//! `serve --rate R` is the fleet's rate, as one node's is its own: the order source makes R
//! new orders a second, R / 16 in each partition, and each partition is paced by the node that
//! owns it (from when it took it). So a fleet whose nodes own every partition makes R a
//! second in all however many nodes share them, and one node alone makes R.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{PARTITIONS, Part, partition_len, partition_of, position_in};
use crate::pipeline::orders::{OrderGen, position_of};
use crate::pipeline::spout::{BACKLOG_LIMIT, Live, Pacer};
use rebound_runtime::durable::{Journal, SourcePosition};
use rebound_runtime::topology::{MessageId, NextMessage, Spout};

/// How often the spout tells the keeper which of its positions wait for a fate.
const GAPS_EVERY: Duration = Duration::from_millis(100);

/// The most waiting positions per partition the keeper asks the store about at once.
const GAPS_PER_PARTITION: usize = 128;

/// What the keeper tells the spout.
pub(crate) enum Command {
    /// This node now owns the partition, from its committed position.
    Acquired {
        part: Part,
        epoch: u64,
        position: SourcePosition,
    },
    /// Another node owns the partition now: stop emitting from it.
    Lost { part: Part },
    /// These positions of the partition have their fate (written by any node).
    Settled { part: Part, positions: Vec<u64> },
    /// The partition's committed position in the store is `through`: every position at or
    /// below it has its fate (a node that held the partition committed it, and the acked fates
    /// it covers are pruned, so no fate tells of them).
    Committed { part: Part, through: u64 },
}

/// Between the keeper and the spout: commands one way, waiting positions the other.
#[derive(Default)]
pub(crate) struct Desk {
    commands: Mutex<Vec<Command>>,
    gaps: Mutex<Vec<(Part, Vec<u64>)>>,
    owned: Mutex<Vec<Part>>,
}

impl Desk {
    pub(crate) fn send(&self, command: Command) {
        self.commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(command);
    }

    /// The positions each owned partition waits on, as last published.
    pub(crate) fn gaps(&self) -> Vec<(Part, Vec<u64>)> {
        self.gaps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The partitions the spout emits from now.
    pub(crate) fn owned(&self) -> Vec<Part> {
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Owned {
    part: Part,
    epoch: u64,
    position: SourcePosition,
    next: u64,
    len: Option<u64>,
    /// New orders of this partition at its share of `--rate`, if paced.
    pacer: Option<Pacer>,
}

pub(crate) struct FleetSpout {
    pub(crate) orders: OrderGen,
    pub(crate) end: Option<u64>,
    pub(crate) journal: Journal,
    pub(crate) live: Arc<Live>,
    pub(crate) desk: Arc<Desk>,
    /// The fleet's new orders per second (`serve --rate`), if paced.
    rate: Option<f64>,
    parts: Vec<Owned>,
    cursor: usize,
    last_gaps: Instant,
}

impl FleetSpout {
    pub(crate) fn new(
        orders: OrderGen,
        end: Option<u64>,
        journal: Journal,
        live: Arc<Live>,
        desk: Arc<Desk>,
        rate: Option<f64>,
    ) -> FleetSpout {
        FleetSpout {
            orders,
            end,
            journal,
            live,
            desk,
            rate,
            parts: Vec::new(),
            cursor: 0,
            last_gaps: Instant::now(),
        }
    }

    fn take_commands(&mut self) {
        let commands = std::mem::take(
            &mut *self
                .desk
                .commands
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if commands.is_empty() {
            return;
        }
        for command in commands {
            match command {
                Command::Acquired {
                    part,
                    epoch,
                    position,
                } => {
                    self.parts.retain(|o| o.part != part);
                    tracing::info!(
                        partition = part,
                        epoch,
                        committed = position.committed(),
                        "took a partition"
                    );
                    self.parts.push(Owned {
                        part,
                        epoch,
                        next: position.committed() + 1,
                        len: self.end.map(|n| partition_len(part, n)),
                        position,
                        pacer: self.rate.map(|r| {
                            Pacer::new(r / f64::from(PARTITIONS), tokio::time::Instant::now())
                        }),
                    });
                }
                Command::Lost { part } => {
                    if let Some(i) = self.parts.iter().position(|o| o.part == part) {
                        let mut lost = self.parts.swap_remove(i);
                        // What it committed is true whoever owns the partition now.
                        lost.position.sync();
                        tracing::info!(
                            partition = part,
                            epoch = lost.epoch,
                            "lost a partition to another node"
                        );
                    }
                }
                Command::Settled { part, positions } => {
                    if let Some(o) = self.parts.iter_mut().find(|o| o.part == part) {
                        for k in positions {
                            o.position.settled(k);
                        }
                    }
                }
                Command::Committed { part, through } => {
                    if let Some(o) = self.parts.iter_mut().find(|o| o.part == part)
                        && o.position.settled_through(through)
                    {
                        tracing::info!(
                            partition = part,
                            through,
                            "the partition's position was committed further by another node"
                        );
                    }
                }
            }
        }
        self.parts.sort_by_key(|o| o.part);
        *self
            .desk
            .owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = self.parts.iter().map(|o| o.part).collect();
    }

    fn publish_gaps(&mut self) {
        if self.last_gaps.elapsed() < GAPS_EVERY {
            return;
        }
        self.last_gaps = Instant::now();
        let gaps = self
            .parts
            .iter()
            .map(|o| (o.part, o.position.unsettled(GAPS_PER_PARTITION)))
            .filter(|(_, g)| !g.is_empty())
            .collect();
        *self
            .desk
            .gaps
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = gaps;
        for o in &mut self.parts {
            o.position.sync();
        }
    }

    fn settled(&mut self, id: &MessageId) {
        let Some(n) = position_of(id.as_str()) else {
            return;
        };
        let part = partition_of(n);
        if let Some(o) = self.parts.iter_mut().find(|o| o.part == part) {
            o.position.settled(position_in(n));
        }
    }
}

impl Spout for FleetSpout {
    fn next(&mut self) -> NextMessage {
        self.take_commands();
        self.publish_gaps();
        if self.journal.backlog() > BACKLOG_LIMIT || self.parts.is_empty() {
            return NextMessage::Idle;
        }
        for _ in 0..self.parts.len() {
            let i = self.cursor % self.parts.len();
            self.cursor = self.cursor.wrapping_add(1);
            let o = &mut self.parts[i];
            if o.pacer.as_ref().is_some_and(|p| !p.ready()) {
                continue;
            }
            while o.len.is_none_or(|len| o.next <= len) {
                let k = o.next;
                o.next += 1;
                if o.position.should_skip(k) {
                    continue;
                }
                if let Some(p) = &mut o.pacer {
                    p.handed_one();
                }
                o.position.handing_out(k);
                let n = super::order_at(o.part, k);
                self.live.high.fetch_max(n, Relaxed);
                return NextMessage::Ready(self.orders.message(n).with_offset(k));
            }
        }
        // Nothing to hand out now: partitions may come (a node dies), and the fleet decides
        // when the run is over, not this spout.
        NextMessage::Idle
    }

    fn ack(&mut self, id: &MessageId) {
        self.live.acked.fetch_add(1, Relaxed);
        self.settled(id);
    }

    fn dead_lettered(&mut self, id: &MessageId) {
        self.live.dead_lettered.fetch_add(1, Relaxed);
        self.settled(id);
    }

    fn close(&mut self) {
        for o in &mut self.parts {
            o.position.sync();
        }
    }
}
