//! The decision log's runtime side: each decision, sampled, held for the store until the
//! journal drains it (`Durable::log_decisions`, one `WriteOp::LogDecisions` per page, behind
//! the decisions: a decision never waits for it).
//!
//! The sample is taken by the decision's jitter seed (a stable hash of the message and the
//! attempt), so it costs no random draw and a replay samples the same decisions. The log
//! holds at most [`BUFFER_AT_MOST`] entries: past it (a store that stopped taking writes) new
//! entries are dropped and counted, never queued without bound. The log is a sample for
//! analysis, not a record.
//!
//! A decision only copies what its entry needs (`log_buffer.rs`). The entries' texts (their
//! JSON, as the store keeps them) are written by the log's own thread, `rebound-decisions`,
//! every few milliseconds, off the spout tasks and the journal, which are the pipeline's
//! critical path; the journal hands the written pages on (and at a flush writes what the
//! thread has not reached yet itself, so a flush misses none).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use rebound_engine::release::Arm;
use rebound_engine::{Decided, FailureContext};

use super::log_buffer::{Buffer, Recorded, count, write_pages};
use crate::store::DecisionPage;
use crate::topology::Message;

/// The most entries waiting for the store.
pub const BUFFER_AT_MOST: usize = 20_000;

/// How often the log's thread looks for fresh decisions while they come.
const TICK: Duration = Duration::from_millis(5);

/// Ticks without a fresh decision after which the thread sleeps until the next one.
const PARK_AFTER_TICKS: u32 = 40;

/// `decisions:` of the configuration file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogOptions {
    /// The share of decisions recorded, 0–1 (`decisions.sample`, default 100%).
    pub sample: f64,
    /// The newest entries the store keeps (`decisions.keep`, default 100,000).
    pub keep: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            sample: 1.0,
            keep: 100_000,
        }
    }
}

impl LogOptions {
    /// No decision recorded.
    pub const OFF: LogOptions = LogOptions {
        sample: 0.0,
        keep: 0,
    };
}

/// What [`DecisionLog::waiting`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// Some entry waits for the store.
    pub(crate) pending: bool,
    /// Written pages wait to be taken.
    pub(crate) ready: bool,
}

/// The decisions waiting for the store.
#[derive(Debug)]
pub struct DecisionLog {
    options: LogOptions,
    /// A seed falls in the sample when `seed % 1_000_000 < cut`.
    cut: u64,
    buffer: Arc<Buffer>,
    /// The log's thread writes the entries (false only if it could not start: the journal
    /// then writes them as it takes them).
    threaded: bool,
    recorded: AtomicU64,
}

/// The log's thread: every [`TICK`], writes the fresh decisions into pages, until the log
/// ends. Idle, it sleeps until a decision wakes it (one wake-up per idle spell, not one per
/// decision: a flood is written a tick's worth at a time).
fn write_behind(buffer: Arc<Buffer>) {
    let mut idle = 0;
    let mut state = buffer.lock();
    loop {
        if state.closed {
            return;
        }
        if state.nothing_fresh() {
            if idle >= PARK_AFTER_TICKS {
                state.parked = true;
                state = buffer
                    .arrived
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
                idle = 0;
            } else {
                state = buffer
                    .arrived
                    .wait_timeout(state, TICK)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                idle += 1;
            }
            continue;
        }
        idle = 0;
        let mut chunks = state.take_fresh();
        state.writing = count(&chunks);
        drop(state);
        let mut pages = Vec::new();
        write_pages(&mut chunks, &mut pages);
        state = buffer.lock();
        state.writing = 0;
        state.pages.append(&mut pages);
        state.give_back(chunks);
        // A flush waiting for these goes on.
        buffer.arrived.notify_all();
        drop(state);
        std::thread::sleep(TICK);
        state = buffer.lock();
    }
}

impl DecisionLog {
    pub(crate) fn new(options: LogOptions) -> DecisionLog {
        let sample = if options.sample.is_finite() {
            options.sample.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let cut = if options.keep == 0 {
            0
        } else {
            (sample * 1_000_000.0).round() as u64
        };
        let buffer = Arc::new(Buffer::default());
        let threaded = cut > 0 && {
            let theirs = Arc::clone(&buffer);
            let spawned = std::thread::Builder::new()
                .name("rebound-decisions".into())
                .spawn(move || write_behind(theirs));
            if let Err(e) = &spawned {
                tracing::warn!(error = %e,
                    "the decision log's thread did not start: the journal writes its entries");
            }
            spawned.is_ok()
        };
        DecisionLog {
            options,
            cut,
            buffer,
            threaded,
            recorded: AtomicU64::new(0),
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> LogOptions {
        self.options
    }

    /// Whether a decision whose jitter seed is `seed` is recorded.
    pub fn samples(&self, seed: u64) -> bool {
        seed % 1_000_000 < self.cut
    }

    /// Records one decision (when sampled): `ctx` as the set saw it (the rules' time),
    /// `decided` what the rules decided, `arm` the canary arm that decided, while a canary
    /// runs.
    pub(crate) fn record(
        &self,
        message: &Message,
        ctx: &FailureContext<'_>,
        seed: u64,
        decided: &Decided,
        arm: Option<Arm>,
    ) {
        if !self.samples(seed) {
            return;
        }
        let recorded = Recorded::of(message, ctx, seed, decided, arm);
        let mut state = self.buffer.lock();
        if state.held >= BUFFER_AT_MOST {
            drop(state);
            self.buffer.dropped.fetch_add(1, Relaxed);
            return; // `recorded` is freed here, outside the lock
        }
        state.push(recorded);
        let wake = std::mem::take(&mut state.parked);
        drop(state);
        if wake {
            self.buffer.arrived.notify_all();
        }
        self.recorded.fetch_add(1, Relaxed);
    }

    /// What waits for the store, in one look: whether any entry does (recorded, being
    /// written or written), and whether written pages are ready to take (without the log's
    /// thread, any entry is).
    pub(crate) fn waiting(&self) -> Waiting {
        let state = self.buffer.lock();
        Waiting {
            pending: state.held > 0,
            ready: !state.pages.is_empty() || (!self.threaded && !state.nothing_fresh()),
        }
    }

    /// Takes everything that waits for the store, oldest first, in pages (waiting for the
    /// log's thread to finish what it is writing).
    pub fn take(&self) -> Vec<DecisionPage> {
        self.take_ready(true)
    }

    /// Takes what is ready for the store, oldest first: the pages the log's thread wrote.
    /// With `all`, waits for the thread to finish what it is writing and takes everything,
    /// writing the fresh decisions here (as it does every time without the thread).
    pub(crate) fn take_ready(&self, all: bool) -> Vec<DecisionPage> {
        let mut state = self.buffer.lock();
        while all && state.writing > 0 {
            state = self
                .buffer
                .arrived
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        let mut pages = std::mem::take(&mut state.pages);
        let mut fresh = if (all || !self.threaded) && state.writing == 0 {
            state.take_fresh()
        } else {
            Vec::new()
        };
        let taken = pages.iter().map(DecisionPage::len).sum::<usize>() + count(&fresh);
        state.held = state.held.saturating_sub(taken);
        drop(state);
        write_pages(&mut fresh, &mut pages);
        if !fresh.is_empty() {
            self.buffer.lock().give_back(fresh);
        }
        pages
    }

    /// Entries recorded so far (handed to the store or waiting).
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Relaxed)
    }

    /// Entries dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.buffer.dropped.load(Relaxed)
    }
}

impl Drop for DecisionLog {
    fn drop(&mut self) {
        self.buffer.lock().closed = true;
        self.buffer.arrived.notify_all();
    }
}
