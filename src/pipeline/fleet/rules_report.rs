//! The rule set a node runs, written into its row the moment it changes (`scale-out.md`: all
//! live nodes report a pushed version on `/v1/nodes` within 2 s). The keeper's heartbeat
//! writes the whole report every lease / 3, which is too late for that; this task writes only
//! the rule fields, whenever the reloader accepts a set here (a push to this node, a set
//! adopted from the record, a file edit, a rollback) or the errors it reports change.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use rebound_engine::PolicyHandle;
use rebound_store_redis::{Member, RedisStore};

/// Why this node does not run the set of record, if it does not (shown on `/v1/nodes`).
pub type RulesErrors = Arc<Mutex<Option<Vec<String>>>>;

/// Told whenever the set this node runs, or its [`RulesErrors`], may have changed: the fleet's
/// pipeline then writes them into the node's row at once (`/v1/nodes` within 2 s of a push,
/// not at the next heartbeat).
pub type RulesChanged = Arc<tokio::sync::Notify>;

pub(crate) struct RulesReport {
    pub(crate) store: Arc<RedisStore>,
    pub(crate) member: Member,
    pub(crate) rules: Arc<PolicyHandle>,
    pub(crate) errors: RulesErrors,
    pub(crate) changed: RulesChanged,
}

impl RulesReport {
    /// Until `stop`: on each change, writes what the node runs now. A write that fails is
    /// left to the next heartbeat, which carries the same fields.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = stop.changed() => return,
            }
            // Read when written, not when told: a burst of changes writes the last one.
            let version = self.rules.current().version().to_string();
            let errors = self
                .errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let (store, member) = (self.store.clone(), self.member.clone());
            let written = tokio::task::spawn_blocking(move || {
                store.report_rules(&member, &version, errors.as_deref())
            })
            .await;
            if let Ok(Err(e)) = written {
                tracing::debug!(error = %e, "writing the node's rule version failed; the next heartbeat carries it");
            }
        }
    }
}
