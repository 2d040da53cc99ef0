//! Rules across nodes (`docs/spec/scale-out.md`, "Rules across nodes"): on a shared store the
//! store holds the rule set of record and its history, and every node runs it.
//!
//! - [`StoreRecord`] is the engine's [`SetRecord`] over the store: every set this node accepts
//!   (a push, a rollback, a file edit in its `--rules`) is written to the store first, with a
//!   compare-and-set on the version, so a stale `If-Match` is a 409 on any node.
//! - [`join`] runs at start: an empty store is seeded from `--rules`; a store with another set
//!   wins, and is mirrored into `--rules` (the node logs that its files differed).
//! - [`follow`] keeps the node on the set of record: on a hint from the store's channel, on
//!   every resubscription, and by polling the version every [`POLL`]. A set that does not
//!   compile here is not run (the node keeps its set, reports the errors on `/v1/nodes` and
//!   counts a rejected reload): never half a set.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use rebound_engine::Version;
use rebound_engine::reload::{
    HistoryEntry, Publication, PublishError, PushError, Reloader, SetRecord, Source,
};
use rebound_runtime::store::StoreError;
use rebound_runtime::time::Timestamp;
use rebound_store_redis::{Pushed, RedisOptions, RedisStore, RuleRecord, RulesHint};
use tokio::sync::watch;

use crate::pipeline::fleet::{RulesChanged, RulesErrors};
use tokio::task::JoinHandle;

/// How often a node reads the version of record even without a hint.
pub const POLL: Duration = Duration::from_millis(500);

/// Why a node could not join the fleet's rule set of record.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This node's set cannot be the set of record: the store keeps rule files as text.
    #[error(transparent)]
    NotText(#[from] NotText),
}

/// A rule file that is not UTF-8 text, which the store cannot keep.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not UTF-8 text")]
pub struct NotText(pub String);

/// The set of record in the shared store, as the engine's [`SetRecord`].
pub struct StoreRecord(pub Arc<RedisStore>);

impl SetRecord for StoreRecord {
    fn publish(&self, set: &Publication<'_>) -> Result<(), PublishError> {
        let record = record_of(
            set.version,
            set.files
                .iter()
                .map(|f| (f.name.as_str(), f.bytes.as_slice())),
            set.source,
        )
        .map_err(|e| PublishError::Unavailable(e.to_string()))?;
        match self.0.push_rules(set.expected, &record) {
            Ok(Pushed::Done | Pushed::Unchanged) => Ok(()),
            Ok(Pushed::Conflict { current }) => Err(PublishError::Conflict {
                current: current.unwrap_or(Version::from_hash(0)),
            }),
            Err(e) => Err(PublishError::Unavailable(e.to_string())),
        }
    }
}

fn record_of<'a>(
    version: Version,
    files: impl Iterator<Item = (&'a str, &'a [u8])>,
    source: Source,
) -> Result<RuleRecord, NotText> {
    let files = files
        .map(|(name, bytes)| {
            String::from_utf8(bytes.to_vec())
                .map(|text| (name.to_owned(), text))
                .map_err(|_| NotText(name.to_owned()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RuleRecord {
        version,
        files,
        source,
        at: Timestamp::now(),
    })
}

/// Takes the store's set into `reloader` (mirrored into its rules directory). Returns the
/// errors if it does not compile here (the set in force stays).
fn adopt(reloader: &Reloader, record: RuleRecord) -> Result<(), Vec<String>> {
    let files: BTreeMap<String, String> = record.files.into_iter().collect();
    match reloader.adopt(files) {
        Ok(_) => Ok(()),
        Err(PushError::Rejected(rejected)) => {
            Err(rejected.errors().map(|d| d.to_string()).collect())
        }
        Err(e) => Err(vec![e.to_string()]),
    }
}

/// At start: seeds an empty store with this node's set, or takes the store's set. Blocking.
pub fn join(
    store: &RedisStore,
    reloader: &Reloader,
    node: &str,
    errors: &RulesErrors,
) -> Result<(), JoinError> {
    let local = reloader.handle().current();
    let mut record = store.rules()?;
    if record.is_none() {
        let seed = record_of(
            *local.version(),
            local
                .files()
                .iter()
                .map(|f| (f.name.as_str(), f.bytes.as_slice())),
            Source::File,
        )?;
        match store.seed_rules(&seed)? {
            Pushed::Done | Pushed::Unchanged => {
                tracing::info!(version = %local.version(), "seeded the shared store with this node's rules");
            }
            Pushed::Conflict { .. } => record = store.rules()?,
        }
    }
    if let Some(record) = record
        && record.version != *local.version()
    {
        tracing::warn!(
            local = %local.version(),
            store = %record.version,
            dir = %reloader.dir().display(),
            "this node's rule files differ from the shared store's set; mirroring the store's"
        );
        set_errors(errors, adopt(reloader, record).err());
    }
    let version = *reloader.handle().current().version();
    let current = errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    store.set_applied(node, version, current.as_deref())?;
    Ok(())
}

fn set_errors(errors: &RulesErrors, now: Option<Vec<String>>) {
    if let Some(e) = &now {
        tracing::warn!(
            errors = e.len(),
            "the shared store's rule set does not compile here; the set in force stays"
        );
    }
    *errors.lock().unwrap_or_else(PoisonError::into_inner) = now;
}

/// Keeps the node on the set of record until `stop` (see the [module docs](self)).
pub fn follow(
    store: Arc<RedisStore>,
    options: RedisOptions,
    reloader: Arc<Reloader>,
    node: String,
    errors: RulesErrors,
    changed: RulesChanged,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut hints = {
            let (store, options) = (store.clone(), options.clone());
            match tokio::task::spawn_blocking(move || store.rules_notifications(&options)).await {
                Ok(Ok(h)) => Some(h),
                _ => {
                    tracing::warn!("cannot subscribe to rule pushes; polling the store only");
                    None
                }
            }
        };
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut rejected: Option<Version> = None;
        loop {
            let hinted = async {
                match hints.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick.tick() => {}
                hint = hinted => {
                    match hint {
                        Some(RulesHint::Pushed(_) | RulesHint::Subscribed) => {}
                        None => hints = None, // the channel is gone: polling goes on
                    }
                }
                _ = stop.changed() => return,
            }
            let (s, r, n, e) = (
                store.clone(),
                reloader.clone(),
                node.clone(),
                errors.clone(),
            );
            let last_rejected = rejected;
            let result =
                tokio::task::spawn_blocking(move || catch_up(&s, &r, &n, &e, last_rejected)).await;
            match result {
                Ok(Ok(now_rejected)) => {
                    if now_rejected != rejected {
                        // The errors reported changed (the reloader told of the set itself).
                        changed.notify_one();
                    }
                    rejected = now_rejected
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "reading the shared rule set failed"),
                Err(_) => {}
            }
        }
    })
}

/// One look at the version of record; adopts a new one. Returns the version that failed to
/// compile here, if the record is at one (so it is not tried again until it changes).
fn catch_up(
    store: &RedisStore,
    reloader: &Reloader,
    node: &str,
    errors: &RulesErrors,
    rejected: Option<Version>,
) -> Result<Option<Version>, StoreError> {
    let Some(version) = store.rules_version()? else {
        return Ok(None);
    };
    let local = *reloader.handle().current().version();
    if version == local || Some(version) == rejected {
        return Ok(rejected.filter(|r| *r == version));
    }
    let Some(record) = store.rules()? else {
        return Ok(None);
    };
    let version = record.version;
    let outcome = adopt(reloader, record);
    let failed = outcome.is_err();
    set_errors(errors, outcome.err());
    let running = *reloader.handle().current().version();
    let current = errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    store.set_applied(node, running, current.as_deref())?;
    Ok(failed.then_some(version))
}

/// The most history entries a node reads back (the store keeps them all).
const HISTORY_READ: usize = 10_000;

/// The fleet's rule history in the store, for the admin API's history and rollback.
#[derive(Debug)]
pub struct SharedHistory(pub Arc<RedisStore>);

impl crate::admin::rules::SharedRules for SharedHistory {
    fn history(&self) -> Result<Vec<HistoryEntry>, StoreError> {
        self.0.rules_history(HISTORY_READ)
    }

    fn rollback_target(&self) -> Result<Option<crate::admin::rules::RollbackTarget>, StoreError> {
        let entries = self.0.rules_history(HISTORY_READ)?;
        let Some(version) = rollback_version(&entries) else {
            return Ok(None);
        };
        let record = self.0.rules_at(version)?;
        Ok(record.map(|r| (version, r.files.into_iter().collect())))
    }

    fn files_at(&self, version: Version) -> Result<Option<BTreeMap<String, String>>, StoreError> {
        let record = self.0.rules_at(version)?;
        Ok(record.map(|r| r.files.into_iter().collect()))
    }
}

/// Which version a rollback restores, from the history (newest first): replayed oldest
/// first, each accepted set is pushed on a stack. A rollback to the set just below the top
/// was one step back, and pops the set it undid, so repeated rollbacks walk further back; a
/// rollback to any other version (`{"version": V}`) is pushed like a push, so the next
/// rollback returns to the set it replaced. A single node's reloader does the same
/// (`Reloader::rollback_to`).
fn rollback_version(history: &[HistoryEntry]) -> Option<Version> {
    let mut stack: Vec<Version> = Vec::new();
    for entry in history.iter().rev() {
        let below_top = stack.len().checked_sub(2).map(|i| stack[i]);
        if entry.source == Source::Rollback && below_top == Some(entry.version) {
            stack.pop();
        } else {
            stack.push(entry.version);
        }
    }
    stack.len().checked_sub(2).map(|i| stack[i])
}

#[cfg(test)]
mod tests {
    use super::rollback_version;
    use rebound_engine::Version;
    use rebound_engine::reload::{HistoryEntry, Outcome, Source};

    /// Version `n`.
    fn v(n: u64) -> Version {
        Version::from_hash(n)
    }

    /// A history, newest first, as the store answers it.
    fn h(entries: &[(u64, Source)]) -> Vec<HistoryEntry> {
        entries
            .iter()
            .map(|&(n, source)| HistoryEntry {
                version: v(n),
                outcome: Outcome::Accepted,
                source,
                at: std::time::UNIX_EPOCH,
                errors: Vec::new(),
                by: None,
                arms: None,
            })
            .collect()
    }

    const PUSH: Source = Source::Push;
    const BACK: Source = Source::Rollback;
    const SEED: Source = Source::File;

    #[test]
    fn repeated_rollbacks_walk_further_back() {
        // Newest first: seed v1, push v2, push v3.
        let pushed = h(&[(3, PUSH), (2, PUSH), (1, SEED)]);
        assert_eq!(rollback_version(&pushed), Some(v(2)));
        let once = h(&[(2, BACK), (3, PUSH), (2, PUSH), (1, SEED)]);
        assert_eq!(rollback_version(&once), Some(v(1)));
        let twice = h(&[(1, BACK), (2, BACK), (3, PUSH), (2, PUSH), (1, SEED)]);
        assert_eq!(rollback_version(&twice), None);
        assert_eq!(rollback_version(&h(&[(1, SEED)])), None);
    }

    #[test]
    fn a_rollback_to_a_chosen_version_is_undone_by_the_next_rollback() {
        // Newest first: seed v1, push v2, push v3, roll back to v1 by its version.
        let chosen = [(1, BACK), (3, PUSH), (2, PUSH), (1, SEED)];
        assert_eq!(rollback_version(&h(&chosen)), Some(v(3)));
        // Undone (back to v3, one step): then the walk goes on from v3, as a node's does.
        let undone = [&[(3, BACK)][..], &chosen[..]].concat();
        assert_eq!(rollback_version(&h(&undone)), Some(v(2)));
    }
}
