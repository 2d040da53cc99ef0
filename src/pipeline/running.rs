//! [`RunningPipeline`]: a started pipeline, from its first delivery to its report: the
//! session's checkpoints, the end of the run, and the graceful stop.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::bolts::OrdersWriter;
use super::{PipelineError, PipelineHandle, Progress, Report, blocking, fleet, now_ms};
use rebound_runtime::RunningTopology;
use rebound_runtime::stats::Stats;
use rebound_runtime::store::{ScheduledRetry, Store, StoreError, StoredDeadLetter};

pub(super) struct Session {
    pub(super) id: i64,
    pub(super) started: Instant,
    pub(super) stop: watch::Sender<bool>,
    pub(super) checkpoints: JoinHandle<()>,
}

/// A running pipeline. Stop it with [`RunningPipeline::stop`], which drains, persists and
/// reports; dropping it stops the topology at once (safe, like a crash: nothing is lost).
pub struct RunningPipeline {
    pub(super) handle: PipelineHandle,
    pub(super) topology: Option<RunningTopology>,
    pub(super) session: Option<Session>,
    pub(super) writer: Option<OrdersWriter>,
    /// On a shared store: stops the fleet keeper.
    pub(super) keeper: Option<fleet::KeeperStop>,
    /// Stops the dead-letter keeper's sweeps.
    pub(super) letters: Option<super::letters::KeeperLoop>,
}

impl std::fmt::Debug for RunningPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningPipeline")
            .field("handle", &self.handle)
            .field("running", &self.topology.is_some())
            .finish()
    }
}

pub(super) async fn checkpoint_loop(
    handle: PipelineHandle,
    session: i64,
    started: Instant,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let h = handle.clone();
        let elapsed = started.elapsed();
        let result = blocking(move || {
            let s = &h.shared;
            let stats = h.session_stats();
            Ok(s.book
                .checkpoint(session, elapsed, s.live.high.load(Relaxed), &stats, None)?)
        })
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "checkpointing the session failed");
        }
    }
}

impl RunningPipeline {
    /// A handle for the admin API and the metrics.
    pub fn handle(&self) -> PipelineHandle {
        self.handle.clone()
    }

    /// The live counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.handle.stats()
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn Store> {
        self.handle.store()
    }

    /// See [`PipelineHandle::replay`].
    pub fn replay(
        &self,
        id: &str,
        operator: &str,
        reason: &str,
    ) -> Result<ScheduledRetry, StoreError> {
        self.handle.replay(id, operator, reason)
    }

    /// See [`PipelineHandle::skip`].
    pub fn skip(
        &self,
        id: &str,
        operator: &str,
        reason: &str,
    ) -> Result<StoredDeadLetter, StoreError> {
        self.handle.skip(id, operator, reason)
    }

    /// Where the run stands now.
    pub fn progress(&self) -> Progress {
        self.handle.progress()
    }

    /// True if the run had finished before this process started (nothing runs; [`stop`]
    /// returns the stored report).
    ///
    /// [`stop`]: RunningPipeline::stop
    pub fn already_finished(&self) -> bool {
        self.topology.is_none()
    }

    /// Completes when every message of the run has its fate, nothing waits to be retried
    /// and no dead letter waits for its label's redrive. Never completes for an unbounded run.
    pub async fn finished(&self) {
        match &self.topology {
            None => {}
            Some(_) if self.handle.shared.run.messages.is_none() => std::future::pending().await,
            Some(_) if self.handle.shared.fleet.is_some() => {
                // The fleet's run ends when every order has its fate, whoever settled it.
                let fleet = self.handle.shared.fleet.as_ref().expect("checked");
                fleet.finished().await;
            }
            Some(t) => loop {
                t.wait_quiescent().await;
                let Some(letters) = self.handle.shared.letters.clone() else {
                    return;
                };
                // Quiet now; done unless a label is still to redrive a letter.
                let sweep = match blocking(move || Ok(letters.sweep()?)).await {
                    Ok(sweep) => sweep,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the dead letters to redrive failed");
                        return;
                    }
                };
                if sweep.redriven == 0 && sweep.waiting == 0 {
                    return;
                }
                if sweep.redriven == 0 {
                    tokio::time::sleep(super::letters::SWEEP_EVERY).await;
                }
            },
        }
    }

    /// Stops the pipeline gracefully and reports: the spout stops, trees in flight finish (up
    /// to `drain_timeout`; their failures are still decided and persisted), the journal is
    /// flushed, the session's counters are written, and the report is computed from the
    /// durable state. A run whose messages all have their fate is marked finished.
    pub async fn stop(mut self, drain_timeout: Duration) -> Result<Report, PipelineError> {
        let handle = self.handle.clone();
        let Some(topology) = self.topology.take() else {
            return blocking(move || handle.report()).await;
        };
        if let Some(d) = &handle.shared.durable {
            // Claim no more: what is due and not yet claimed is another node's to fire.
            d.stop_claiming();
        }
        if let Some(letters) = self.letters.take() {
            letters.stop().await;
        }
        let shutdown = topology.shutdown(drain_timeout).await;
        if !shutdown.drained {
            tracing::warn!(
                abandoned = shutdown.abandoned,
                "stopped with trees in flight; their messages are delivered again by the next run"
            );
        }
        // A slow write still sleeping must not land after the report.
        if let Some(w) = self.writer.take() {
            w.close().await;
        }
        if let Some(d) = &handle.shared.durable {
            d.journal().flush().await;
        }
        let mut session_id = None;
        let mut elapsed = None;
        if let Some(s) = self.session.take() {
            elapsed = Some(s.started.elapsed());
            session_id = Some(s.id);
            let _ = s.stop.send(true);
            let _ = s.checkpoints.await;
        }
        let book_handle = handle.clone();
        let (report, finished) = blocking(move || {
            let handle = book_handle;
            let s = &handle.shared;
            let reached_end = s
                .run
                .messages
                .is_some_and(|n| s.live.settled.load(Relaxed) >= n);
            let mut report = handle.report()?;
            let finished = reached_end || report.complete;
            if let (Some(id), Some(elapsed)) = (session_id, elapsed) {
                let stats = handle.session_stats();
                let ended = if finished { "finished" } else { "interrupted" };
                s.book
                    .checkpoint(id, elapsed, s.live.high.load(Relaxed), &stats, Some(ended))?;
            }
            if finished {
                s.book.finish_run(now_ms())?;
            }
            report = handle.report()?;
            Ok((report, finished))
        })
        .await?;
        // Only now, its last counters written, the node leaves the fleet (so a node waiting
        // for the others' last counters waits for this one's).
        if let Some(keeper) = self.keeper.take() {
            keeper.stop().await;
        }
        let Some(fleet) = handle.shared.fleet.clone().filter(|_| finished) else {
            return Ok(report);
        };
        // The other nodes saw the end within a progress tick of this one, and write their
        // last counters as they stop: read the report once they have, so that every node
        // prints the same.
        fleet.settled().await;
        blocking(move || handle.report()).await
    }
}
