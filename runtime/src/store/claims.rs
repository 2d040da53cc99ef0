//! [`ClaimQueue`]: what a shared store adds to [`Store`](super::Store) so that several nodes
//! share the scheduled retries. The embedded store does not implement it: one process owns
//! its file and fires its retries from memory.
//!
//! The life of a retry on a shared store:
//!
//! 1. `WriteOp::Schedule` (through the journal, like any write) puts its row in the **due**
//!    set, by due time.
//! 2. [`ClaimQueue::claim`] takes due rows *and* moves them to the **in-flight** set with a
//!    lease deadline and a fresh [`ClaimToken`], in one atomic step: there is no moment at
//!    which a claimed retry is in neither set (the step Sidekiq's poller splits in two).
//! 3. The claiming node fires it, renewing the lease ([`ClaimQueue::extend`]) until its fate
//!    is written; the fate (`Acked`, `DeadLetter`) drops the row, and a new `Schedule` under
//!    the claim's token puts it back in the due set.
//! 4. A lease that runs out (the node died or stalled) is returned to the due set by any
//!    node's [`ClaimQueue::reap`]; another node claims it (a *reclaim*, counted). A write
//!    under the old token is then refused ([`Applied::Stale`](super::Applied::Stale)). A row
//!    reaped more than `max_reaps` times is a poison message: it is handed to the reaper to
//!    dead-letter (reason `crash_loop`).
//!
//! Leases run on the server's clock (`TIME`), never a node's, so clock skew between nodes
//! cannot reap early. Due times are the deciding node's wall clock, so skew only shifts when a
//! retry fires.

use std::time::Duration;

use super::{MessageId, Result, ScheduledRetry};
use crate::time::Timestamp;
pub use crate::topology::ClaimToken;

/// What one [`ClaimQueue::claim`] took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimed {
    /// The claimed retries, each with its claim's token (`claim`).
    pub retries: Vec<ScheduledRetry>,
    /// How many of them had been claimed before and reaped (fired again because a node died
    /// or stalled holding them).
    pub reclaims: usize,
    /// The due time of the earliest retry still waiting, if any (when to claim next).
    pub next_due: Option<Timestamp>,
    /// The server's clock when it claimed.
    pub now: Timestamp,
}

/// What one [`ClaimQueue::reap`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reaped {
    /// Claims whose lease ran out, now due again.
    pub returned: Vec<MessageId>,
    /// Claims reaped more than `max_reaps` times: leased to the reaping node, which must
    /// dead-letter them (reason `crash_loop`); if it dies first, they are reaped again.
    pub crash_loops: Vec<ScheduledRetry>,
}

/// The claims of a shared store (the life of a claim is told in `store/claims.rs`). Every call
/// is one round trip and one atomic script on the server, safe to run again after a lost
/// reply.
pub trait ClaimQueue: Send + Sync {
    /// Claims up to `limit` retries due now (the server's clock) for `node`, with a lease of
    /// `lease`.
    fn claim(&self, node: &str, limit: usize, lease: Duration) -> Result<Claimed>;

    /// Renews the leases of `claims` to `lease` from now, where the row is still in flight
    /// under that token. Returns, per claim, whether it is still this node's (false: its fate
    /// was written, it was scheduled again, or it was reaped).
    fn extend(
        &self,
        node: &str,
        claims: &[(MessageId, ClaimToken)],
        lease: Duration,
    ) -> Result<Vec<bool>>;

    /// Returns up to `limit` claims whose lease ran out to the due set, due at once (at their
    /// own due time, which is past: first in line). A claim reaped more than `max_reaps` times
    /// since it was last scheduled is leased to `node` for `lease` instead and returned in
    /// [`Reaped::crash_loops`].
    fn reap(&self, node: &str, limit: usize, max_reaps: u32, lease: Duration) -> Result<Reaped>;

    /// The number of retries waiting and in flight (the fleet's queue depth).
    fn depth(&self) -> Result<(u64, u64)>;
}
