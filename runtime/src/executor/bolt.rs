//! Bolt tasks: run the user's bolt on each input, catch panics (fail the tuple with `PANIC`,
//! restart the instance, log one line), and turn the outcome into anchored emits and acker
//! messages. Each task times its bolt on every tuple with the monotonic clock, into a local
//! histogram it adds to its component's in [`Stats`] once per batch.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};

use super::outbox::Outbox;
use super::{Caught, guarded};
use crate::stats::{BOLT_LATENCY_BOUNDS, Histogram, Stats};
use crate::topology::bolt::{Completion, while_restarting};
use crate::topology::tuple::Anchors;
use crate::topology::{
    Bolt, DeferredBolt, Emitter, Failure, PendingTuple, TaskInfo, Tuple, Values, codes,
};

/// Everything a bolt task is wired to.
pub(crate) struct BoltParts {
    pub(crate) info: TaskInfo,
    pub(crate) input: mpsc::Receiver<Vec<Tuple>>,
    pub(crate) outbox: Outbox,
    pub(crate) stats: Arc<Stats>,
    /// The component's index among the topology's bolts (its bolt-latency histogram).
    pub(crate) component: usize,
    pub(crate) arity: usize,
    pub(crate) tick: Option<Duration>,
}

/// Builds an instance, or `None` if the factory panicked (every tuple then fails with `PANIC`
/// until an attempt succeeds).
fn make<B>(factory: &(dyn Fn(&TaskInfo) -> B + Send + Sync), info: &TaskInfo) -> Option<B> {
    match guarded(|| factory(info)) {
        Ok(b) => Some(b),
        Err(p) => {
            tracing::error!(component = info.component, task = info.index, panic = %p.message, at = p.at(), "bolt factory panicked");
            None
        }
    }
}

/// Drops an instance after a panic: handles it still holds fail with `PANIC`.
fn discard<B>(bolt: Option<B>) {
    while_restarting(|| {
        let _ = catch_unwind(AssertUnwindSafe(move || drop(bolt)));
    });
}

/// The tuple's failure for a panic, logged as one line (its message and location; the
/// process's panic hook prints nothing for it when it asks [`crate::caught_panic`]).
fn panic_failure(p: &BoltParts, caught: &Caught, during: &str) -> Failure {
    let (component, task) = (p.info.component, p.info.index);
    let f = Failure::new(
        codes::PANIC,
        format!("bolt {component}[{task}] panicked: {}", caught.message),
    );
    tracing::error!(component, task, panic = %caught.message, at = caught.at(), "bolt panicked{during}; restarting the task");
    p.stats.panic();
    f
}

/// Time spent on one tuple, into the task's local histogram.
fn time_tuple(latency: &mut Histogram, started: tokio::time::Instant) {
    latency.observe_in(crate::time::now() - started, &BOLT_LATENCY_BOUNDS);
}

/// Runs a simple-path bolt task.
pub(crate) async fn run_bolt<B: Bolt>(
    factory: Arc<dyn Fn(&TaskInfo) -> B + Send + Sync>,
    mut p: BoltParts,
) {
    let mut bolt = make(&*factory, &p.info);
    let mut emits: Vec<Values> = Vec::new();
    let mut latency = Histogram::default();
    while let Some(batch) = p.input.recv().await {
        for tuple in batch {
            if bolt.is_none() {
                bolt = make(&*factory, &p.info);
            }
            let Some(b) = bolt.as_mut() else {
                let f = Failure::new(codes::PANIC, "bolt instance could not be created");
                p.outbox.fail(&tuple.anchors, &f);
                continue;
            };
            emits.clear();
            let arity = p.arity;
            let started = crate::time::now();
            let result = guarded(|| b.execute(&tuple, &mut Emitter::new(&mut emits, arity)));
            time_tuple(&mut latency, started);
            match result {
                Ok(Ok(())) => {
                    let mut ack_val = [0u64];
                    if !emits.is_empty() {
                        for v in emits.drain(..) {
                            p.outbox.emit(v, &[&tuple.anchors], &mut ack_val);
                        }
                    }
                    p.outbox.ack(&tuple.anchors, ack_val[0]);
                }
                Ok(Err(f)) => p.outbox.fail(&tuple.anchors, &f),
                Err(caught) => {
                    let f = panic_failure(&p, &caught, "");
                    p.outbox.fail(&tuple.anchors, &f);
                    discard(bolt.take());
                    bolt = make(&*factory, &p.info);
                }
            }
            if p.outbox.should_flush() {
                p.outbox.flush().await;
            }
        }
        p.stats.merge_bolt_latency(p.component, &mut latency);
        p.outbox.flush().await;
    }
    if let Some(mut b) = bolt {
        let _ = catch_unwind(AssertUnwindSafe(|| b.cleanup()));
    }
    p.outbox.flush().await;
}

async fn next_tick(ticker: &mut Option<Interval>) {
    match ticker {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn complete(outbox: &mut Outbox, c: Completion) {
    match c.outcome {
        Ok(emits) => {
            let parents: Vec<&Anchors> = c.parents.iter().collect();
            let mut ack_vals = vec![0u64; parents.len()];
            for v in emits {
                outbox.emit(v, &parents, &mut ack_vals);
            }
            for (parent, val) in c.parents.iter().zip(ack_vals) {
                outbox.ack(parent, val);
            }
        }
        Err(f) => {
            for parent in &c.parents {
                outbox.fail(parent, &f);
            }
        }
    }
}

/// Runs a [`DeferredBolt`] task: inputs become [`PendingTuple`]s; their completions come back
/// on an unbounded channel (bounded in practice by the handles alive, which
/// `max_spout_pending` bounds) so that acking never blocks, even from `Drop`.
pub(crate) async fn run_deferred<B: DeferredBolt>(
    factory: Arc<dyn Fn(&TaskInfo) -> B + Send + Sync>,
    mut p: BoltParts,
) {
    let (tx, mut done) = mpsc::unbounded_channel::<Completion>();
    let mut bolt = make(&*factory, &p.info);
    let mut latency = Histogram::default();
    let mut ticker = p.tick.map(|every| {
        let mut t = tokio::time::interval_at(crate::time::now() + every, every);
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
        t
    });
    loop {
        tokio::select! {
            biased;
            Some(c) = done.recv() => {
                complete(&mut p.outbox, c);
                while let Ok(c) = done.try_recv() {
                    complete(&mut p.outbox, c);
                }
            }
            batch = p.input.recv() => {
                let Some(batch) = batch else { break };
                for tuple in batch {
                    if bolt.is_none() {
                        bolt = make(&*factory, &p.info);
                    }
                    let handle = PendingTuple::new(tuple, p.arity, tx.clone());
                    let Some(b) = bolt.as_mut() else {
                        handle.fail(Failure::new(codes::PANIC, "bolt instance could not be created"));
                        continue;
                    };
                    // On a panic the handle is dropped while unwinding and fails as PANIC.
                    let started = crate::time::now();
                    let result = guarded(|| b.execute(handle));
                    time_tuple(&mut latency, started);
                    if let Err(caught) = result {
                        panic_failure(&p, &caught, "");
                        discard(bolt.take());
                        bolt = make(&*factory, &p.info);
                    }
                    while let Ok(c) = done.try_recv() {
                        complete(&mut p.outbox, c);
                    }
                    if p.outbox.should_flush() {
                        p.outbox.flush().await;
                    }
                }
                p.stats.merge_bolt_latency(p.component, &mut latency);
            }
            () = next_tick(&mut ticker) => {
                let ticked = match bolt.as_mut() {
                    Some(b) => guarded(|| b.tick()),
                    None => Ok(()),
                };
                if let Err(caught) = ticked {
                    panic_failure(&p, &caught, " in tick");
                    discard(bolt.take());
                    bolt = make(&*factory, &p.info);
                }
            }
        }
        p.outbox.flush().await;
    }
    if let Some(mut b) = bolt.take() {
        let _ = catch_unwind(AssertUnwindSafe(|| b.cleanup()));
        let _ = catch_unwind(AssertUnwindSafe(move || drop(b)));
    }
    drop(tx);
    while let Ok(c) = done.try_recv() {
        complete(&mut p.outbox, c);
    }
    p.outbox.flush().await;
}
