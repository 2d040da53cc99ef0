//! Dead-letter levels that act (`rules.md`, "Dead-letter levels"): the [`LetterKeeper`]
//! carries out the rule set's `labels:` on the store, on every node of any topology: it
//! redrives the letters whose label says `redrive` once `after` has passed (at most `max`
//! times in a message's life) and marks `expired` the open letters older than their label's
//! `expire`. [`alerting`] hands each new letter whose label says `alert` to an [`AlertSink`]
//! (the embedding's receivers); [`overdue_cutoffs`] are the labels' SLAs, for routes and gauges.
//!
//! The store is the record: a sweep reads the open letters due for an action and acts through
//! the journal, so a redrive that came due while the process was down happens at its next
//! start, an operator's skip or replay (the letter no longer open) cancels it, and two nodes
//! that race for one letter see the second refused. Label durations are in the rules' time:
//! the [`TimeScale`] shortens them like the rules' delays.
//!
//! ```no_run
//! # async fn demo(durable: rebound_runtime::durable::Durable,
//! #     rules: std::sync::Arc<rebound_engine::PolicyHandle>) {
//! use rebound_runtime::durable::labels::LetterKeeper;
//! use rebound_runtime::time::TimeScale;
//!
//! let keeper = LetterKeeper::new(durable, rules, TimeScale::REAL);
//! let sweeping = keeper.spawn(); // every SWEEP_EVERY, until
//! sweeping.stop().await;
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rebound_engine::{CompiledSet, PolicyHandle};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Durable;
use crate::RunningTopology;
use crate::fate::DeadLetter;
use crate::store::{DeadLetterFilter, DeadLetterStatus, MAX_PAGE, OpenLetters, StoreError};
use crate::time::{TimeScale, Timestamp};

/// Where `alert:` letters go: the embedding's receivers (the product's alert dispatcher).
pub trait AlertSink: Send + Sync + std::fmt::Debug {
    /// Queues `letter` for `receiver` (the label's `alert:`). Runs on the journal's storing
    /// task: it must never block.
    fn send(&self, receiver: &str, letter: &DeadLetter);
}

/// How often the keeper sweeps the letters.
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);

/// For each label of `set` with an SLA: the time before which its open letters are overdue.
pub fn overdue_cutoffs(
    set: &CompiledSet,
    scale: TimeScale,
    now: Timestamp,
) -> Vec<(String, Timestamp)> {
    set.labels()
        .iter()
        .filter_map(|p| {
            Some((
                p.label.as_str().to_owned(),
                now.saturating_sub(scale.to_real(p.sla?)),
            ))
        })
        .collect()
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Letters redriven.
    pub redriven: u64,
    /// Open letters whose label will redrive them later.
    pub waiting: u64,
    /// Letters marked expired.
    pub expired: u64,
}

/// The open letters by label and the redrives a keeper made, for the gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LetterCounts {
    /// Open letters by label, with the overdue ones and the oldest.
    pub open: Vec<OpenLetters>,
    /// Redrives so far, by label.
    pub redrives: Vec<(String, u64)>,
    /// When the open letters were read.
    pub now: Timestamp,
}

/// Carries out the labels' actions; see the [module docs](self). Cheap to clone.
#[derive(Clone, Debug)]
pub struct LetterKeeper {
    shared: Arc<KeeperShared>,
}

#[derive(Debug)]
struct KeeperShared {
    durable: Durable,
    rules: Arc<PolicyHandle>,
    scale: TimeScale,
    redrives: Mutex<BTreeMap<String, u64>>,
    expired: AtomicU64,
    /// One sweep at a time (the loop's and [`LetterKeeper::sweep`]'s callers').
    sweeping: Mutex<()>,
}

/// Stops the keeper's loop.
pub struct KeeperLoop {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl KeeperLoop {
    /// Stops the loop. A sweep under way is not waited for: what it did is in the store, and
    /// what it did not do the next start's first sweep does.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.task.abort();
        let _ = self.task.await;
    }
}

impl LetterKeeper {
    /// A keeper over `durable`'s store that reads the labels of the set in force in `rules`;
    /// label durations run at `scale`. It acts only when swept ([`LetterKeeper::spawn`] or
    /// [`LetterKeeper::sweep`]). Letters that alert are told by [`alerting`], on the durable
    /// layer's dead-letter observer.
    pub fn new(durable: Durable, rules: Arc<PolicyHandle>, scale: TimeScale) -> LetterKeeper {
        LetterKeeper {
            shared: Arc::new(KeeperShared {
                durable,
                rules,
                scale,
                redrives: Mutex::default(),
                expired: AtomicU64::new(0),
                sweeping: Mutex::new(()),
            }),
        }
    }

    /// Sweeps every [`SWEEP_EVERY`] until stopped.
    pub fn spawn(&self) -> KeeperLoop {
        let (stop, mut stopped) = watch::channel(false);
        let keeper = self.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => return,
                }
                let k = keeper.clone();
                match tokio::task::spawn_blocking(move || k.sweep()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "sweeping the dead letters failed; trying again")
                    }
                    Err(e) => tracing::warn!(error = %e, "the dead-letter sweep failed"),
                }
            }
        });
        KeeperLoop { stop, task }
    }

    /// Completes once `topology` is quiet (see [`RunningTopology::wait_quiescent`]) and no
    /// label still owes a redrive: each time it is quiet a sweep runs; a redrive made starts
    /// the wait again, and one still to come is swept for every [`SWEEP_EVERY`]. A store that
    /// cannot be read ends the wait (logged): a batch job does not hang on it.
    pub async fn until_settled(&self, topology: &RunningTopology) {
        loop {
            topology.wait_quiescent().await;
            let keeper = self.clone();
            let sweep = match tokio::task::spawn_blocking(move || keeper.sweep()).await {
                Ok(Ok(sweep)) => sweep,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "reading the dead letters to redrive failed");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the dead-letter sweep failed");
                    return;
                }
            };
            if sweep.redriven == 0 && sweep.waiting == 0 {
                return;
            }
            if sweep.redriven == 0 {
                tokio::time::sleep(SWEEP_EVERY).await;
            }
        }
    }

    /// Redrives and expires what is due now. Blocking.
    pub fn sweep(&self) -> Result<Sweep, StoreError> {
        let s = &self.shared;
        let _one = s.sweeping.lock().unwrap_or_else(PoisonError::into_inner);
        let set = s.rules.current();
        // Nothing to do (most sets): the store is not read at all.
        if !set
            .labels()
            .iter()
            .any(|p| p.redrive.is_some() || p.expire.is_some())
        {
            return Ok(Sweep::default());
        }
        let now = s.durable.time().wall();
        let mut sweep = Sweep::default();
        for policy in set.labels().iter() {
            let label = policy.label.as_str();
            if let Some(redrive) = policy.redrive {
                let due_before = now.saturating_sub(s.scale.to_real(redrive.after));
                for letter in open_letters(s, label, None)? {
                    let done = letter.message.retry.redrives;
                    if done >= redrive.max {
                        continue;
                    }
                    if letter.at >= due_before {
                        sweep.waiting += 1;
                        continue;
                    }
                    let reason = format!("redrive {}/{} (label {label})", done + 1, redrive.max);
                    match s.durable.redrive(letter.id(), &reason) {
                        Ok(_) => {
                            sweep.redriven += 1;
                            tracing::info!(id = %letter.id(), label, redrive = done + 1, max = redrive.max, "dead letter redriven");
                            *s.redrives
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .entry(label.to_owned())
                                .or_default() += 1;
                        }
                        // Skipped, replayed or redriven by someone else meanwhile.
                        Err(
                            StoreError::AlreadyHandled { .. } | StoreError::DeadLetterNotFound(_),
                        ) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            if let Some(expire) = policy.expire {
                let before = now.saturating_sub(s.scale.to_real(expire));
                for letter in open_letters(s, label, Some(before))? {
                    let reason = format!(
                        "expired after {} (label {label})",
                        humantime::format_duration(expire)
                    );
                    match s.durable.expire(letter.id(), &reason) {
                        Ok(()) => {
                            sweep.expired += 1;
                            s.expired.fetch_add(1, Relaxed);
                        }
                        Err(
                            StoreError::AlreadyHandled { .. } | StoreError::DeadLetterNotFound(_),
                        ) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(sweep)
    }

    /// The open letters by label (with the overdue ones under the set's SLAs) and the
    /// redrives so far, for the gauges. Blocking.
    pub fn counts(&self) -> Result<LetterCounts, StoreError> {
        let s = &self.shared;
        let now = s.durable.time().wall();
        let cutoffs = overdue_cutoffs(&s.rules.current(), s.scale, now);
        Ok(LetterCounts {
            open: s.durable.store().open_letters(&cutoffs)?,
            redrives: self.redrives(),
            now,
        })
    }

    /// Redrives so far, by label.
    pub fn redrives(&self) -> Vec<(String, u64)> {
        let r = self
            .shared
            .redrives
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        r.iter().map(|(l, n)| (l.clone(), *n)).collect()
    }

    /// The time scale label durations run at.
    pub fn scale(&self) -> TimeScale {
        self.shared.scale
    }
}

/// The open letters of `label` (dead-lettered before `before`, if given), oldest last, a page
/// at most: a sweep that leaves some finds them on the next.
fn open_letters(
    s: &KeeperShared,
    label: &str,
    before: Option<Timestamp>,
) -> Result<Vec<DeadLetter>, StoreError> {
    let page = s.durable.store().dead_letters(&DeadLetterFilter {
        label: Some(label.to_owned()),
        status: Some(DeadLetterStatus::Dead),
        until: before,
        limit: MAX_PAGE,
        ..DeadLetterFilter::default()
    })?;
    Ok(page.items.into_iter().map(|d| d.letter).collect())
}

/// The dead-letter observer that hands each new letter whose label (in the set in force in
/// `rules`) says `alert:` to `sink`: give it to [`Durable::on_dead_letters`], alone or called
/// from the embedding's own observer.
pub fn alerting(
    rules: Arc<PolicyHandle>,
    sink: Arc<dyn AlertSink>,
) -> impl Fn(&[DeadLetter]) + Send + Sync + 'static {
    move |letters| alert(&rules.current(), sink.as_ref(), letters)
}

fn alert(set: &CompiledSet, sink: &dyn AlertSink, letters: &[DeadLetter]) {
    for letter in letters {
        let receiver = set
            .labels()
            .get(letter.label.as_str())
            .and_then(|p| p.alert.as_deref());
        if let Some(receiver) = receiver {
            sink.send(receiver, letter);
        }
    }
}
