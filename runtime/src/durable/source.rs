//! [`SourcePosition`]: a durable source's committed position, and which messages above it need
//! not be delivered again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::Journal;
use crate::store::{Result, Store, WriteOp};
use crate::time::TimeSource;
use crate::topology::MessageId;

/// How far ahead of what it hands out a source reserves positions (see
/// [`SourcePosition::handing_out`]).
const RESERVE_STEP: u64 = 4096;

/// How far the low-water mark moves before it is queued to the journal on its own; the rest is
/// written at [`SourcePosition::sync`].
const COMMIT_STEP: u64 = 256;

/// The position of a source whose messages are numbered `1, 2, 3…` (an offset, a sequence).
///
/// - The **committed position** is the low-water mark: every message at or below it has its
///   fate (acked, or its dead letter stored). It is written to the store (through the journal,
///   after the fates it covers), so a restart resumes from it.
/// - Messages above it may have fates too (a slow retry holds the mark back while later messages
///   finish). Those, and those waiting in a retry queue, must not be delivered again: after a
///   restart, [`SourcePosition::load`] asks the store for the fates above the mark, and
///   [`SourcePosition::should_skip`] says which positions to pass over ("one fate per message").
/// - To bound that question, the source reserves positions ahead of what it hands out (a
///   second position, `SOURCE.reserved`, queued before any message beyond the previous
///   reservation is handed out): no message above the committed reservation can have a fate.
pub struct SourcePosition {
    source: String,
    reserved_source: String,
    journal: Journal,
    time: Arc<dyn TimeSource>,
    committed: u64,
    queued: u64,
    settled_above: Settled,
    skip: HashSet<u64>,
    reserved: u64,
    high: u64,
    known_at_start: u64,
}

/// Which positions above the committed one have their fate: flags in a window that starts just
/// above it (index 0 is `committed + 1`), so that a fate in order costs a push and a pop.
#[derive(Debug, Default)]
struct Settled {
    window: VecDeque<bool>,
    count: u64,
}

impl Settled {
    /// The position `distance` above the committed one has its fate (`distance` >= 1).
    fn insert(&mut self, distance: u64) {
        let i = (distance - 1) as usize;
        if self.window.len() <= i {
            self.window.resize(i + 1, false);
        }
        if !std::mem::replace(&mut self.window[i], true) {
            self.count += 1;
        }
    }

    /// If the position just above the committed one has its fate, forgets it (the committed
    /// position moves past it) and says so.
    fn pop_next(&mut self) -> bool {
        if self.window.front() == Some(&true) {
            self.window.pop_front();
            self.count -= 1;
            true
        } else {
            false
        }
    }
}

impl std::fmt::Debug for SourcePosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourcePosition")
            .field("source", &self.source)
            .field("committed", &self.committed)
            .field("reserved", &self.reserved)
            .field("high", &self.high)
            .finish_non_exhaustive()
    }
}

impl SourcePosition {
    /// Loads the committed position of `source` and the fates above it. `id_of` names the
    /// message at a position; `owned` are positions whose messages wait in a retry queue
    /// (recovered retries): they are skipped too, and settle when their fate comes. With
    /// `rows`, positions whose message has a retry row in the store are skipped the same way
    /// (on a shared store, where the fleet's retries are claimed, not recovered).
    ///
    /// Blocking: call it before the topology starts (it reads the store).
    pub fn load(
        store: &dyn Store,
        journal: Journal,
        time: Arc<dyn TimeSource>,
        source: &str,
        id_of: impl Fn(u64) -> String,
        owned: impl IntoIterator<Item = u64>,
        rows: bool,
    ) -> Result<SourcePosition> {
        let reserved_source = format!("{source}.reserved");
        let committed = store.position(source)?.unwrap_or(0);
        let reserved = store
            .position(&reserved_source)?
            .unwrap_or(0)
            .max(committed);
        let mut pos = SourcePosition {
            source: source.to_owned(),
            reserved_source,
            journal,
            time,
            committed,
            queued: committed,
            settled_above: Settled::default(),
            skip: HashSet::new(),
            reserved,
            high: committed,
            known_at_start: 0,
        };
        let mut n = committed + 1;
        while n <= reserved {
            let end = (n + 511).min(reserved);
            let chunk: HashMap<String, u64> = (n..=end).map(|i| (id_of(i), i)).collect();
            let ids: Vec<MessageId> = chunk
                .keys()
                .map(|id| MessageId::from(id.as_str()))
                .collect();
            for (id, _) in store.known_fates(&ids)? {
                if let Some(&i) = chunk.get(id.as_str()) {
                    pos.settled_above.insert(i - committed);
                    pos.skip.insert(i);
                }
            }
            if rows {
                for retry in store.retries(&ids)? {
                    if let Some(&i) = chunk.get(retry.message.id.as_str()) {
                        pos.skip.insert(i);
                    }
                }
            }
            n = end + 1;
        }
        pos.known_at_start = pos.settled_above.count;
        pos.skip
            .extend(owned.into_iter().filter(|&i| i > committed));
        pos.high = pos
            .skip
            .iter()
            .copied()
            .max()
            .unwrap_or(committed)
            .max(committed);
        pos.advance();
        Ok(pos)
    }

    /// The committed low-water mark (as this process knows it; the store may lag a little).
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// Positions above the mark that have their fate (the mark waits for a lower one).
    pub fn settled_above(&self) -> u64 {
        self.settled_above.count
    }

    /// Up to `limit` positions above the mark, lowest first, handed out (or skipped) but not
    /// known to have their fate here. On a shared store another node may have written their
    /// fate (it claimed their retry): ask the store, and tell [`SourcePosition::settled`] of
    /// those it knows, or the mark waits for them forever.
    pub fn unsettled(&self, limit: usize) -> Vec<u64> {
        let mut out = Vec::new();
        let mut n = self.committed + 1;
        while n <= self.high && out.len() < limit {
            let i = (n - self.committed - 1) as usize;
            if !self.settled_above.window.get(i).copied().unwrap_or(false) {
                out.push(n);
            }
            n += 1;
        }
        out
    }

    /// Positions above the mark whose fate was already known when the source was loaded.
    pub fn known_at_start(&self) -> u64 {
        self.known_at_start
    }

    /// The highest position handed out (or known to have been, before a restart).
    pub fn high(&self) -> u64 {
        self.high
    }

    /// True if the message at `n` must not be handed out again: it has a fate, or it waits in
    /// a retry queue.
    pub fn should_skip(&self, n: u64) -> bool {
        n <= self.committed || self.skip.contains(&n)
    }

    /// Call before handing out the message at `n`.
    pub fn handing_out(&mut self, n: u64) {
        self.high = self.high.max(n);
        if n > self.reserved {
            self.reserved = n + RESERVE_STEP;
            self.journal.write_behind(WriteOp::Position {
                source: self.reserved_source.clone(),
                position: self.reserved,
                at: self.time.wall(),
            });
        }
    }

    /// The message at `n` got its fate (its fate is queued to the journal, or committed).
    /// Returns true if the committed position moved.
    pub fn settled(&mut self, n: u64) -> bool {
        if !self.skip.is_empty() {
            self.skip.remove(&n);
        }
        if n <= self.committed {
            return false; // a replayed message: the position is already past it
        }
        self.settled_above.insert(n - self.committed);
        self.advance()
    }

    /// Every position at or below `through` has its fate: the store's committed position is
    /// there (another node that held the source committed it). The acked fates a position
    /// covers are pruned from the store, so a source waiting on one of them learns it only
    /// from the position. Returns true if the committed position moved.
    pub fn settled_through(&mut self, through: u64) -> bool {
        if through <= self.committed {
            return false;
        }
        let distance = through - self.committed;
        let window = &mut self.settled_above;
        let gone = (distance as usize).min(window.window.len());
        let settled = window.window.drain(..gone).filter(|&s| s).count() as u64;
        window.count -= settled;
        self.committed = through;
        // The store holds it already: only what settles above it is written.
        self.queued = self.queued.max(through);
        self.high = self.high.max(through);
        self.skip.retain(|&n| n > through);
        self.advance();
        true
    }

    fn advance(&mut self) -> bool {
        let before = self.committed;
        while self.settled_above.pop_next() {
            self.committed += 1;
        }
        if self.committed >= self.queued + COMMIT_STEP {
            self.sync();
        }
        self.committed > before
    }

    /// Queues the committed position to the journal if it moved since last queued.
    pub fn sync(&mut self) {
        if self.committed > self.queued {
            self.queued = self.committed;
            self.journal.write_behind(WriteOp::Position {
                source: self.source.clone(),
                position: self.committed,
                at: self.time.wall(),
            });
        }
    }
}
