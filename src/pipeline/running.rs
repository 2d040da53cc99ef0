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
use rebound_runtime::store::Store;

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
    pub(super) letters: Option<rebound_runtime::durable::labels::KeeperLoop>,
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
        let result = blocking(move || Ok(h.checkpoint(session, elapsed, None)?)).await;
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
            Some(t) => match &self.handle.shared.letters {
                Some(letters) => letters.until_settled(t).await,
                None => t.wait_quiescent().await,
            },
        }
    }

    /// Stops the pipeline gracefully and reports: the spout stops, trees in flight finish (up
    /// to `drain_timeout`; their failures are still decided and persisted), the journal is
    /// flushed, the session's counters are written, and the report is computed from the
    /// durable state. A run whose messages all have their fate is marked finished. Unhurried:
    /// the steps after the drain take what they take (see [`RunningPipeline::halt`] for a stop
    /// with a deadline).
    pub async fn stop(self, drain_timeout: Duration) -> Result<Report, PipelineError> {
        let plan = StopPlan {
            drain: drain_timeout,
            by: Instant::now() + drain_timeout + UNHURRIED,
            report: true,
        };
        self.halt(plan).await?.report().await
    }

    /// Stops the pipeline gracefully by `plan.by`, without reading the report (a stop that
    /// prints none should not pay for it: on a shared store the report costs a round trip per
    /// 512 orders of the run). Trees in flight get `plan.drain`, cut short so that the steps
    /// after it keep `TAIL` (2 s) before `plan.by`; the dead-letter keeper's and the fleet
    /// keeper's last rounds are let go at their bounds (a partition not released is taken over
    /// after its lease). The journal's flush and the session's last counters are not cut
    /// short: the caller bounds the whole (`app::lifecycle`), and a store that cannot take
    /// them by then is a store that does not take writes.
    pub async fn halt(mut self, plan: StopPlan) -> Result<Stopped, PipelineError> {
        let handle = self.handle.clone();
        let begun = Instant::now();
        let Some(topology) = self.topology.take() else {
            return Ok(Stopped {
                handle,
                finished: false,
                by: plan.by,
            });
        };
        if let Some(d) = &handle.shared.durable {
            // Claim no more: what is due and not yet claimed is another node's to fire.
            d.stop_claiming();
        }
        if let Some(letters) = self.letters.take() {
            letters.stop().await;
        }
        let drain = plan
            .drain
            .min(plan.by.saturating_duration_since(Instant::now() + TAIL));
        let shutdown = topology.shutdown(drain).await;
        if !shutdown.drained {
            tracing::warn!(
                abandoned = shutdown.abandoned,
                "stopped with trees in flight; their messages are delivered again by the next run"
            );
        }
        let drained = begun.elapsed();
        // A slow write still sleeping must not land after the report.
        if let Some(w) = self.writer.take() {
            w.close().await;
        }
        if let Some(d) = &handle.shared.durable {
            d.journal().flush().await;
        }
        let flushed = begun.elapsed();
        let mut session_id = None;
        let mut elapsed = None;
        if let Some(s) = self.session.take() {
            elapsed = Some(s.started.elapsed());
            session_id = Some(s.id);
            let _ = s.stop.send(true);
            let _ = s.checkpoints.await;
        }
        let book_handle = handle.clone();
        let finished = blocking(move || {
            let handle = book_handle;
            let s = &handle.shared;
            let reached_end = s
                .run
                .messages
                .is_some_and(|n| s.live.settled.load(Relaxed) >= n);
            // An unbounded run never finishes; a bounded one not seen to reach its end may
            // still have (a restart of a finished run): only then is the report read here.
            let finished = reached_end || (s.run.messages.is_some() && handle.report()?.complete);
            if let (Some(id), Some(elapsed)) = (session_id, elapsed) {
                let ended = if finished { "finished" } else { "interrupted" };
                handle.checkpoint(id, elapsed, Some(ended))?;
            }
            if finished {
                s.book.finish_run(now_ms())?;
            }
            Ok(finished)
        })
        .await?;
        let recorded = begun.elapsed();
        // Only now, its last counters written, the node leaves the fleet (so a node waiting
        // for the others' last counters waits for this one's).
        if let Some(keeper) = self.keeper.take() {
            let until = match plan.report {
                true => plan.by.checked_sub(REPORT_SHARE).unwrap_or(plan.by),
                false => plan.by,
            };
            keeper.stop(until).await;
        }
        tracing::debug!(
            drained_ms = drained.as_millis() as u64,
            flushed_ms = flushed.as_millis() as u64,
            recorded_ms = recorded.as_millis() as u64,
            left_ms = begun.elapsed().as_millis() as u64,
            "stopped"
        );
        Ok(Stopped {
            handle,
            finished,
            by: plan.by,
        })
    }
}

/// How long [`RunningPipeline::stop`] allows the steps after the drain.
const UNHURRIED: Duration = Duration::from_secs(3600);

/// What a stop keeps for the steps after the drain (the last writes, the session's counters,
/// the fleet keeper's last round): the drain is cut short by it.
const TAIL: Duration = Duration::from_secs(2);

/// What a stop keeps of its time for the report, after waiting for the other nodes of a
/// finished fleet run.
const REPORT_SHARE: Duration = Duration::from_millis(1500);

/// How a graceful stop spends its time.
#[derive(Clone, Copy, Debug)]
pub struct StopPlan {
    /// The longest trees in flight may take to finish.
    pub drain: Duration,
    /// When every step of the stop must be over.
    pub by: Instant,
    /// Whether the caller reads the report next ([`Stopped::report`]): the fleet keeper's
    /// last round then leaves it a share of the time.
    pub report: bool,
}

/// A pipeline stopped by [`RunningPipeline::halt`]: its report is read from the store only if
/// asked for.
#[derive(Debug)]
pub struct Stopped {
    handle: PipelineHandle,
    finished: bool,
    by: Instant,
}

impl Stopped {
    /// True if every message of the run has its fate (the run is marked finished).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Reads the report from the durable state. On a fleet whose run finished it first waits
    /// (until shortly before the stop's deadline, two leases at most) for the other live
    /// nodes to write their last counters, so that every node prints the same report.
    pub async fn report(self) -> Result<Report, PipelineError> {
        let handle = self.handle;
        if let Some(fleet) = handle.shared.fleet.clone().filter(|_| self.finished) {
            let until = self.by.checked_sub(REPORT_SHARE).unwrap_or(self.by);
            fleet.settled(until).await;
        }
        blocking(move || handle.report()).await
    }
}
