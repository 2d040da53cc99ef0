//! [`PipelineHandle`]: what the admin API and the metrics hold of a running pipeline (its
//! counters, its store, the operators' dead-letter actions), and the state it shares.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::fleet::FleetView;
use super::{DataDirLock, Live, PipelineError, Progress, Report, RunBook, RunRecord};
use crate::admin::dead_letters::DeadLetterDesk;
use crate::admin::desks::{DurableDesk, StoreDesk};
use rebound_runtime::durable::Durable;
use rebound_runtime::stats::Stats;
use rebound_runtime::store::{
    self, OperatorAction, ScheduledRetry, Store, StoreError, StoredDeadLetter,
};
use rebound_runtime::time::Timestamp;

pub(super) struct Shared {
    /// Held for as long as anything can write to the data directory.
    pub(super) _lock: Option<DataDirLock>,
    pub(super) store: Arc<dyn Store>,
    pub(super) book: Arc<dyn RunBook>,
    pub(super) durable: Option<Durable>,
    pub(super) stats: Arc<Stats>,
    pub(super) live: Arc<Live>,
    pub(super) run: RunRecord,
    /// On a shared store: the fleet.
    pub(super) fleet: Option<FleetView>,
    /// The labels' actions (none for a run that had finished).
    pub(super) letters: Option<rebound_runtime::durable::labels::LetterKeeper>,
    /// `--time-scale`: the rules' time, label durations included.
    pub(super) time_scale: rebound_runtime::time::TimeScale,
    /// The topology's budgets and breakers (none for a run that had finished).
    pub(super) gate: Option<Arc<rebound_runtime::adaptive::RetryGate>>,
    /// A `--outage` run: the `PAYMENT` retries this process sent into the outage.
    pub(super) outage_retries: Option<Arc<std::sync::atomic::AtomicU64>>,
}

/// A cheap, cloneable handle on a running (or finished) pipeline: its counters, its store,
/// and the operators' dead-letter actions. This is what the admin API holds.
#[derive(Clone)]
pub struct PipelineHandle {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for PipelineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineHandle")
            .field("run", &self.shared.run)
            .finish_non_exhaustive()
    }
}

impl PipelineHandle {
    /// The live counters: emitted, acked, retries (by rule, with a delay histogram), dead
    /// letters (by label), failures (by code), pending, retry queue depth, fuse, complete
    /// latency.
    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// The deliveries the order sink absorbed as duplicates in this session (the report's
    /// `duplicates` covers the whole run, from the durable state).
    pub fn duplicates(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.shared.live.duplicates.clone()
    }

    /// This session's counters as the book keeps them: the runtime's, and what the retry
    /// gate did (so that a report read back after the run shows its budgets and breakers).
    pub(super) fn session_stats(&self) -> super::db::SessionStats {
        let mut stats: super::db::SessionStats = (&self.shared.stats.snapshot()).into();
        if let Some(gate) = &self.shared.gate {
            let snapshot = gate.snapshot(tokio::time::Instant::now());
            (stats.budgets, stats.breakers) = super::report::gate_shares(&snapshot);
        }
        stats
    }

    /// Writes this session's counters so far (`session` and how long it has run) to the book,
    /// with how it ended at its last checkpoint. Blocking.
    pub(super) fn checkpoint(
        &self,
        session: i64,
        elapsed: std::time::Duration,
        ended: Option<&str>,
    ) -> Result<(), super::BookError> {
        let stats = self.session_stats();
        self.shared.book.checkpoint(&super::db::Checkpoint {
            session,
            elapsed,
            emitted_high: self.shared.live.high.load(Relaxed),
            stats: &stats,
            ended,
        })
    }

    /// The store (dead letters, audit log, fates, scheduled retries).
    pub fn store(&self) -> Arc<dyn Store> {
        self.shared.store.clone()
    }

    /// The operators' dead-letter desk: over the durable layer while the topology runs (an
    /// action reaches its live retry queues at once), over the store alone for a run that had
    /// finished.
    pub fn desk(&self) -> Arc<dyn DeadLetterDesk> {
        match &self.shared.durable {
            Some(d) => Arc::new(DurableDesk::new(d.clone(), self.shared.time_scale)),
            None => Arc::new(StoreDesk(self.store())),
        }
    }

    /// On a shared store: the fleet this node is part of.
    pub fn fleet(&self) -> Option<&FleetView> {
        self.shared.fleet.as_ref()
    }

    /// The run this pipeline works on.
    pub fn run(&self) -> &RunRecord {
        &self.shared.run
    }

    /// Replays a dead letter: marked `replayed` and audited in the store, its fate cleared,
    /// and the message back in the live retry queue, due now, to be delivered as a fresh
    /// delivery (attempt 1). Blocking (one store transaction): call it from
    /// `spawn_blocking` in async code.
    pub fn replay(
        &self,
        id: &str,
        operator: &str,
        reason: &str,
    ) -> Result<ScheduledRetry, StoreError> {
        match &self.shared.durable {
            Some(d) => d.replay(id, operator, reason),
            None => store::replay(
                self.shared.store.as_ref(),
                OperatorAction::new(id.into(), operator, reason, Timestamp::now())?,
            ),
        }
    }

    /// Marks a dead letter `skipped` (handled), audited. Blocking.
    pub fn skip(
        &self,
        id: &str,
        operator: &str,
        reason: &str,
    ) -> Result<StoredDeadLetter, StoreError> {
        match &self.shared.durable {
            Some(d) => d.skip(id, operator, reason),
            None => store::skip(
                self.shared.store.as_ref(),
                OperatorAction::new(id.into(), operator, reason, Timestamp::now())?,
            ),
        }
    }

    /// Completes if the store stops taking writes: the journal retried it for its whole
    /// bound and gave up (see [`Journal::failed`](rebound_runtime::durable::Journal::failed)). The
    /// process should then stop: nothing more is committed. Never completes otherwise.
    pub async fn store_failed(&self) -> Arc<rebound_runtime::durable::JournalFailure> {
        match &self.shared.durable {
            Some(d) => d.journal().failed().await,
            None => std::future::pending().await,
        }
    }

    /// Where the run stands now.
    pub fn progress(&self) -> Progress {
        let s = self.shared.stats.snapshot();
        let live = &self.shared.live;
        Progress {
            total: self.shared.run.messages,
            settled: live.settled.load(Relaxed),
            acked: live.acked.load(Relaxed),
            dead_lettered: live.dead_lettered.load(Relaxed),
            retries: s.retries,
            retry_queue: s.retry_queue_depth,
            pending: s.pending,
            journal_backlog: self
                .shared
                .durable
                .as_ref()
                .map_or(0, |d| d.journal().backlog() as u64),
            next_retry_in: s
                .next_retry_due
                .map(|due| due - rebound_runtime::time::Timestamp::now()),
        }
    }

    /// The report from the durable state (as of the last commit). Blocking.
    pub fn report(&self) -> Result<Report, PipelineError> {
        let run = self
            .shared
            .book
            .run()?
            .unwrap_or_else(|| self.shared.run.clone());
        let partitioned = self.shared.fleet.is_some();
        let mut report = Report::load(
            self.shared.store.as_ref(),
            self.shared.book.as_ref(),
            &run,
            partitioned,
        )?;
        if let Some(fleet) = &self.shared.fleet {
            report.node = Some(super::report::NodeShare {
                name: fleet.node.clone(),
                processed: self.shared.stats.snapshot().emitted,
                retries_fired: self
                    .shared
                    .durable
                    .as_ref()
                    .and_then(|d| d.claim_stats())
                    .map_or(0, |c| c.claimed),
                outage_retries: self.shared.outage_retries.as_ref().map(|n| n.load(Relaxed)),
            });
        }
        Ok(report)
    }
}

/// A running pipeline is the admin API's dead-letter desk: listing reads the store, and a
/// replay also puts the message into the live retry queue at once.
impl crate::metrics::FleetGauges for PipelineHandle {
    fn fleet_snapshot(&self) -> crate::metrics::FleetSnapshot {
        let s = &self.shared;
        let Some(fleet) = &s.fleet else {
            return crate::metrics::FleetSnapshot::default();
        };
        let claims = s
            .durable
            .as_ref()
            .and_then(|d| d.claim_stats())
            .unwrap_or_default();
        crate::metrics::FleetSnapshot {
            reclaims: claims.reclaims,
            stale_writes: s.durable.as_ref().map_or(0, |d| d.journal().stats().stale),
            round_trips: fleet.store.round_trips(),
            errors: fleet
                .store
                .errors()
                .into_iter()
                .map(|(k, n)| (k.to_owned(), n))
                .collect(),
            up: fleet.state.down_since().is_none(),
            nodes: fleet.state.nodes.load(Relaxed),
        }
    }
}

impl crate::metrics::GateGauges for PipelineHandle {
    fn gate_snapshot(&self) -> Option<rebound_runtime::adaptive::GateSnapshot> {
        let gate = self.shared.gate.as_ref()?;
        Some(gate.snapshot(tokio::time::Instant::now()))
    }

    fn scope(&self) -> Option<rebound_runtime::adaptive::Scope> {
        Some(rebound_runtime::adaptive::RetryGate::scope(
            self.shared.gate.as_ref()?,
        ))
    }
}

impl crate::metrics::LetterGauges for PipelineHandle {
    fn letter_snapshot(&self) -> Option<rebound_runtime::durable::labels::LetterCounts> {
        let letters = self.shared.letters.as_ref()?;
        match letters.counts() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "reading the open dead letters for the metrics failed");
                None
            }
        }
    }
}
