//! The fleet's records on the shared store: what several `rebound` processes (nodes) on one
//! namespace must agree on besides the retries and fates, whatever topology they run. (A
//! program keeps records of its own beside them, by its own scripts:
//! [`RedisStore::eval`](crate::RedisStore::eval).)
//!
//! - `nodes.rs`: who is in the fleet. A node joins under its name with an id of this process
//!   (its [`Member`]), is refused while another live process holds the name, heartbeats what
//!   `/v1/nodes` shows, and leaves.
//! - `partitions.rs`: a source in partitions, each owned by one live node by lease, with a
//!   fencing epoch that changes whenever a partition changes hands.
//! - `rules.rs`: the rule set of record, compare-and-set on its version, its history (never
//!   trimmed) and what each node runs; `notify.rs`: the hints that a new set was pushed.
//! - `canary.rs`: the fleet's one canary (`release.md`): its record, its arms' counters
//!   summed over the nodes, a start and an end that the first node wins.
//! - `adaptive.rs`: the fleet's budgets, breakers, fuse and heat ([`RedisFleetState`], the
//!   runtime's `adaptive::FleetState`): one script a sync.
//!
//! Every write is one Lua script (`scripts/fleet_*.lua`, run by `RedisStore::eval` as a
//! program's own are), atomic on the server: it reads and checks first, then writes, and is
//! safe to run again after a lost reply. Every lease and
//! liveness decision uses the server's clock (`TIME`), never the node's, so clock skew between
//! nodes cannot make one look dead to another. Scripts get the namespace's `{NS}:` prefix and
//! build per-name keys from it: one hash tag, one cluster slot.

mod adaptive;
mod canary;
mod nodes;
mod notify;
mod partitions;
mod rules;

pub use adaptive::RedisFleetState;
pub use canary::{CanaryRecord, CanaryStart};
pub use nodes::{Join, Member, NodeBreaker, NodeReport, NodeStatus};
pub use notify::{RulesHint, RulesNotifications};
pub use partitions::{Held, Lease, Owned, PartitionState, partition_source};
pub use rules::{Pushed, RuleRecord, RulesApplied};

use std::time::Duration;

use rebound_runtime::store::StoreError;

/// A lease as the scripts take it: whole milliseconds, at least one.
fn lease_ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A value the store holds that does not decode.
fn corrupt(what: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        table: "redis",
        what,
        detail: detail.to_string(),
    }
}
