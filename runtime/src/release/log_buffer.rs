//! What the decision log holds between a decision and the store: each decision as the
//! deciding task copied it ([`Recorded`]), in chunks of a fixed size, until the log's thread
//! (`rebound-decisions`) writes their texts into [`DecisionPage`]s, which wait for the
//! journal.
//!
//! The deciding task is the pipeline's critical path (one spout task decides every failure of
//! its messages), so recording does as little as it can: the message's id and biz are shared,
//! not copied; the outcome is the rules' `Decided` as it is; a chunk is taken from the spare
//! ones, so a flood of decisions never grows (and copies) a buffer. The entry's JSON, the
//! allocations of its owned form and their release all happen on the log's thread.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rebound_engine::release::{Arm, LoggedContext, LoggedDecision, LoggedSignals, Outcome};
use rebound_engine::{Attrs, Decided, FailureContext, HeaderMap, SignalView};

use crate::store::{DecisionPage, decision_to_json};
use crate::topology::{Message, MessageId};

/// The text a page holds before the next entry starts another: pages of one size are
/// allocated once and reused by the allocator, where one growing buffer would be copied at
/// every doubling and handed fresh memory from the system.
const PAGE_BYTES: usize = 64 * 1024;

/// Decisions a chunk holds.
const CHUNK: usize = 256;

/// Spare chunks kept for reuse (about 16 MiB's worth of entries at most).
const SPARE_AT_MOST: usize = 64;

/// A decision as the deciding task copies it: what its logged entry needs, owned, without the
/// entry's own allocations (its strings, its version's text) or its JSON.
#[derive(Debug)]
pub(super) struct Recorded {
    id: MessageId,
    biz: Arc<str>,
    code: String,
    attempt: u32,
    redrives: u32,
    elapsed: Duration,
    retry_after: Option<Duration>,
    last_delay: Duration,
    attrs: Attrs,
    headers: HeaderMap,
    now: u64,
    signals: LoggedSignals,
    seed: u64,
    decided: Decided,
    arm: Option<Arm>,
}

impl Recorded {
    /// The decision of `ctx` (the failure of `message`, its jitter drawn from `seed`).
    pub(super) fn of(
        message: &Message,
        ctx: &FailureContext<'_>,
        seed: u64,
        decided: &Decided,
        arm: Option<Arm>,
    ) -> Recorded {
        Recorded {
            id: message.id.clone(),
            // The message's own, shared; the context's when a policy decided another biz.
            biz: if *message.biz == *ctx.biz {
                Arc::clone(&message.biz)
            } else {
                Arc::from(ctx.biz)
            },
            code: ctx.code.to_owned(),
            attempt: ctx.attempt,
            redrives: ctx.redrives,
            elapsed: ctx.elapsed,
            retry_after: ctx.retry_after,
            last_delay: ctx.last_delay,
            attrs: ctx.attrs.clone(),
            headers: ctx.headers.clone(),
            now: ctx.now,
            signals: LoggedSignals::of(ctx.signals),
            seed,
            decided: decided.clone(),
            arm,
        }
    }

    /// Its logged entry.
    pub(super) fn entry(self) -> LoggedDecision {
        let ctx = FailureContext {
            biz: &self.biz,
            code: &self.code,
            attempt: self.attempt,
            redrives: self.redrives,
            elapsed: self.elapsed,
            retry_after: self.retry_after,
            last_delay: self.last_delay,
            attrs: &self.attrs,
            headers: &self.headers,
            now: self.now,
            // Copied already, as the entry keeps them: moved in below.
            signals: SignalView::NONE,
        };
        let mut context = LoggedContext::of(&ctx, self.seed);
        context.signals = self.signals;
        LoggedDecision {
            id: self.id.as_str().to_owned(),
            context,
            outcome: Outcome::of(&self.decided),
            arm: self.arm,
        }
    }
}

/// What the deciding tasks, the log's thread and the journal share.
#[derive(Debug, Default)]
pub(super) struct Buffer {
    state: Mutex<State>,
    /// Signalled when a decision comes while the thread is parked, when the thread has
    /// written what it took, and at the log's end.
    pub(super) arrived: Condvar,
    /// Entries dropped: the buffer was full.
    pub(super) dropped: AtomicU64,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// Decisions recorded and not yet written, oldest first, in chunks of [`CHUNK`].
    fresh: Vec<Vec<Recorded>>,
    /// Empty chunks, with their room, for the next decisions.
    spare: Vec<Vec<Recorded>>,
    /// Decisions being written by the thread now (taken from `fresh`; older than `fresh`).
    pub(super) writing: usize,
    /// Written pages, oldest first (older than what is being written).
    pub(super) pages: Vec<DecisionPage>,
    /// Every decision held: in `fresh`, being written and in `pages`.
    pub(super) held: usize,
    /// The log is gone: the thread ends.
    pub(super) closed: bool,
    /// The thread sleeps until a decision comes (it was idle): the next one wakes it.
    pub(super) parked: bool,
}

impl Buffer {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Adds `recorded` at the end, into the last chunk or a spare one.
    pub(super) fn push(&mut self, recorded: Recorded) {
        let room = self.fresh.last().is_some_and(|c| c.len() < CHUNK);
        if !room {
            let chunk = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(CHUNK));
            self.fresh.push(chunk);
        }
        let chunk = self.fresh.last_mut().expect("a chunk with room");
        chunk.push(recorded);
        self.held += 1;
    }

    /// True if no decision waits to be written.
    pub(super) fn nothing_fresh(&self) -> bool {
        self.fresh.is_empty()
    }

    /// Takes the fresh decisions (in their chunks, oldest first).
    pub(super) fn take_fresh(&mut self) -> Vec<Vec<Recorded>> {
        std::mem::take(&mut self.fresh)
    }

    /// Keeps `chunks` (emptied) for reuse, up to [`SPARE_AT_MOST`].
    pub(super) fn give_back(&mut self, chunks: Vec<Vec<Recorded>>) {
        for mut chunk in chunks {
            if self.spare.len() >= SPARE_AT_MOST {
                break;
            }
            chunk.clear();
            self.spare.push(chunk);
        }
    }
}

/// Appends the texts of `chunks` to `pages` (a new page when the last is full), emptying
/// the chunks. An entry that cannot be written (it holds only strings and numbers, so none
/// can) is left out with a warning.
pub(super) fn write_pages(chunks: &mut [Vec<Recorded>], pages: &mut Vec<DecisionPage>) {
    for recorded in chunks.iter_mut().flat_map(|c| c.drain(..)) {
        let entry = recorded.entry();
        let text = match decision_to_json(&entry) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(error = %e, id = %entry.id, "a decision log entry not written");
                continue;
            }
        };
        let fits = |p: &DecisionPage| p.is_empty() || p.bytes() + text.len() < PAGE_BYTES;
        if !pages.last().is_some_and(fits) {
            pages.push(DecisionPage::with_capacity(PAGE_BYTES));
        }
        let page = pages.last_mut().expect("a page was just added");
        page.push_text(entry.context.now_ms, &text);
    }
}

/// Decisions in `chunks`.
pub(super) fn count(chunks: &[Vec<Recorded>]) -> usize {
    chunks.iter().map(Vec::len).sum()
}
