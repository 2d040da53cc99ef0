//! The bundled order pipeline of `run` and `serve` as a [`Job`]: its options come from the
//! application's [`Options`], the live rules and the alert sink from the [`Wiring`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rebound_runtime::durable::JournalFailure;
use rebound_runtime::fate::BoxFuture;
use rebound_runtime::policy::TimeScale;
use rebound_runtime::store::Store;
use rebound_runtime::topology::Config;
use tokio::time::Instant;

use super::Options;
use super::job::{Job, JobError, ReadProgress, Running, Summary, Wiring};
use crate::admin::AdminState;
use crate::pipeline::faults::Outage;
use crate::pipeline::{self, PipelineOptions, Report, RunningPipeline, StopPlan};

/// The bundled pipeline, to be started: what [`Options`] ask of it.
pub(super) struct Bundled {
    data: PathBuf,
    messages: Option<u64>,
    keyed: bool,
    time_scale: TimeScale,
    rate: Option<f64>,
    outage: Option<Outage>,
    fresh: bool,
    store_give_up: Duration,
    config: Config,
}

impl Bundled {
    pub(super) fn new(options: &Options) -> Bundled {
        Bundled {
            data: options.data.clone(),
            messages: options.messages,
            keyed: options.keyed,
            time_scale: options.time_scale,
            rate: options.rate,
            outage: options.outage,
            fresh: options.fresh,
            store_give_up: options.store_give_up,
            config: options.topology.clone(),
        }
    }
}

impl Job for Bundled {
    fn start(
        self: Box<Self>,
        wiring: Wiring,
    ) -> BoxFuture<'static, Result<Box<dyn Running>, JobError>> {
        let mut p = PipelineOptions::new(wiring.rules, &self.data);
        p.messages = self.messages;
        p.keyed = self.keyed;
        p.time_scale = self.time_scale;
        p.rate = self.rate;
        p.outage = self.outage;
        p.fresh = self.fresh;
        p.store_give_up = self.store_give_up;
        p.config = self.config;
        p.fleet = wiring.fleet;
        p.alerts = Some(wiring.alerts);
        p.release = Some(wiring.release);
        Box::pin(async move {
            let running = pipeline::start(p).await?;
            Ok(Box::new(BundledRunning(running)) as Box<dyn Running>)
        })
    }
}

struct BundledRunning(RunningPipeline);

impl Running for BundledRunning {
    fn attach(&self, state: &mut AdminState) {
        let pipeline = self.0.handle();
        state.metrics.runtime.attach(pipeline.stats());
        state.metrics.letters.attach(pipeline.clone());
        state.metrics.gate.attach(pipeline.clone());
        state
            .metrics
            .runtime
            .attach_duplicates(pipeline.duplicates());
        if let Some(fleet) = pipeline.fleet() {
            state.fleet = Some(Arc::new(fleet.clone()));
            state
                .metrics
                .runtime
                .attach_fleet_depth(fleet.state.queue_depth.clone());
            state.metrics.fleet.attach(pipeline.clone());
        }
        state.dead_letters = Some(pipeline.desk());
    }

    fn store(&self) -> Arc<dyn Store> {
        self.0.handle().store()
    }

    fn finished(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.0.finished())
    }

    fn store_failed(&self) -> BoxFuture<'static, Arc<JournalFailure>> {
        let handle = self.0.handle();
        Box::pin(async move { handle.store_failed().await })
    }

    fn progress(&self) -> Option<ReadProgress> {
        let handle = self.0.handle();
        Some(Box::new(move || handle.progress()))
    }

    fn already_finished(&self) -> bool {
        self.0.already_finished()
    }

    fn stop(
        self: Box<Self>,
        by: Instant,
        drain: Duration,
        report: bool,
    ) -> BoxFuture<'static, Result<Option<Box<dyn Summary>>, JobError>> {
        let plan = StopPlan { drain, by, report };
        Box::pin(async move {
            let stopped = self.0.halt(plan).await?;
            if report {
                let report: Report = stopped.report().await?;
                Ok(Some(Box::new(report) as Box<dyn Summary>))
            } else {
                Ok(None)
            }
        })
    }
}
