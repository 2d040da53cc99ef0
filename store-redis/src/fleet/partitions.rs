//! A source split into partitions, each owned by one live node by lease.
//!
//! A source of `P` partitions (the product's order source has 16: order number mod 16).
//! Partition `p` of source `orders` is the source [`partition_source`]`("orders", p)` = `orders/p`: its lease is the
//! hash `{NS}:src:orders/p` (`owner`, `instance`, `epoch`, `lease_ms`), and its position is
//! committed under that name, fenced by the `epoch`.
//!
//! The protocol, one script per step:
//!
//! - **Balance** (every lease/3 or so, `fleet_balance.lua`): renews every partition the node
//!   holds and takes free ones (never owned, released, or whose lease ended) up to its fair
//!   share, each taking with a new epoch. It never takes a live partition from another node:
//!   a node with more than its share is told its *surplus*.
//! - **Release** (`fleet_release.lua`): the node stops taking messages from a surplus
//!   partition, commits its position, and only then releases it at the epoch it holds it.
//!   Releasing is the caller's explicit second step because only the caller knows when it has
//!   stopped; a store that released on its own would let two nodes emit from one partition.
//! - **Takeover**: a node that dies or stalls past its lease stops renewing; its partitions
//!   become free when their leases end, and the next balancing node takes them with a new
//!   epoch. When the stalled node wakes, its next balance no longer lists them (its old epoch
//!   is in [`Owned::lost`]), and its position writes at the old epoch are refused.
//!
//! Shares converge: while no live member is below floor(P / live), every target is
//! ceil(P / live), enough for every partition; a member below floor makes the others' targets
//! floor, so holders at ceil give one up and only it takes. Nodes that do not run the source
//! (`serve`) are not members and get no share.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::{Member, lease_ms};
use crate::{RedisStore, ScriptCall};
use rebound_runtime::store::Result;
use rebound_runtime::time::Timestamp;

static BALANCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_balance.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_release.lua")));
static PARTITIONS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_partitions.lua")));

/// The name of partition `p` of `source`: `source/p`, the source its position is kept under.
///
/// ```
/// use rebound_store_redis::fleet::partition_source;
/// assert_eq!(partition_source("orders", 3), "orders/3");
/// ```
pub fn partition_source(source: &str, partition: u32) -> String {
    format!("{source}/{partition}")
}

/// One partition a node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Held {
    /// The partition, `0..P`.
    pub partition: u32,
    /// Its fencing epoch: changes each time the partition changes hands (or is taken again
    /// after a release).
    pub epoch: u64,
    /// When the lease ends unless renewed (server time).
    pub until: Timestamp,
}

/// What [`RedisStore::balance_partitions`] left the node with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    /// False if the caller is not the live, registered instance of its node (it was taken
    /// over, left, or has not heartbeat within the lease): it holds nothing and must stop.
    pub member: bool,
    /// Every partition it holds now, by partition.
    pub held: Vec<Held>,
    /// Held now, not held (at that epoch) before the call: start emitting from these.
    pub gained: Vec<Held>,
    /// Held before the call (at that epoch), not now: stop emitting from these at once.
    pub lost: Vec<Held>,
    /// Held partitions beyond its share: stop taking messages from each, commit its
    /// position, then [`RedisStore::release_partition`] it.
    pub surplus: Vec<u32>,
    /// Live members of the source counted (the caller included).
    pub live: u32,
    /// ceil(P / live).
    pub fair: u32,
}

impl Owned {
    /// The held partition `p`, if any.
    pub fn get(&self, partition: u32) -> Option<&Held> {
        self.held.iter().find(|h| h.partition == partition)
    }

    /// The partitions held, without their epochs.
    pub fn partitions(&self) -> Vec<u32> {
        self.held.iter().map(|h| h.partition).collect()
    }
}

/// The lease on one partition, as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The owning node.
    pub node: String,
    /// The owning process.
    pub instance: String,
    /// When the lease ends unless renewed (server time).
    pub until: Timestamp,
}

/// One partition as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The partition.
    pub partition: u32,
    /// Its epoch (0 if it was never owned).
    pub epoch: u64,
    /// Its live owner, if its lease has not ended.
    pub owner: Option<Lease>,
}

impl RedisStore {
    /// Renews the partitions of `source` that `member` holds and takes free ones up to its
    /// fair share of `partitions`, all by leases of `lease`; `holding` is what it held after
    /// its previous call (empty the first time), from which [`Owned::gained`] and
    /// [`Owned::lost`] are worked out. Never takes a live partition from another node.
    pub fn balance_partitions(
        &self,
        source: &str,
        partitions: u32,
        member: &Member,
        lease: Duration,
        holding: &[Held],
    ) -> Result<Owned> {
        let call = ScriptCall::new(&BALANCE)
            .key(self.keys.nodes())
            .key(self.keys.source_members(source))
            .arg(self.keys.prefix())
            .arg(source)
            .arg(partitions)
            .arg(&member.node)
            .arg(&member.instance)
            .arg(lease_ms(lease));
        let (is_member, live, fair, flat, surplus): (u8, u32, u32, Vec<u64>, Vec<u32>) =
            self.eval("balance partitions", call)?;
        let held: Vec<Held> = flat
            .chunks_exact(3)
            .map(|c| Held {
                partition: c[0] as u32,
                epoch: c[1],
                until: Timestamp::from_millis(c[2]),
            })
            .collect();
        let same = |a: &Held, b: &Held| a.partition == b.partition && a.epoch == b.epoch;
        let gained = held
            .iter()
            .filter(|h| !holding.iter().any(|o| same(o, h)))
            .copied()
            .collect();
        let lost = holding
            .iter()
            .filter(|o| !held.iter().any(|h| same(o, h)))
            .copied()
            .collect();
        Ok(Owned {
            member: is_member == 1,
            held,
            gained,
            lost,
            surplus,
            live,
            fair,
        })
    }

    /// Gives partition `held` of `source` back, if `member` still holds it at its epoch
    /// (true). Call it only after the node stopped taking messages from the partition and
    /// committed its position: another node may take it at once.
    pub fn release_partition(&self, source: &str, member: &Member, held: &Held) -> Result<bool> {
        let call = ScriptCall::new(&RELEASE)
            .key(
                self.keys
                    .source_lease(&partition_source(source, held.partition)),
            )
            .arg(&member.node)
            .arg(&member.instance)
            .arg(held.epoch);
        let released: u8 = self.eval("release partition", call)?;
        Ok(released == 1)
    }

    /// Every partition of `source` (`0..partitions`) with its epoch and live owner, by the
    /// server's clock.
    pub fn partition_owners(&self, source: &str, partitions: u32) -> Result<Vec<PartitionState>> {
        let call = ScriptCall::new(&PARTITIONS)
            .key(self.keys.source_members(source))
            .arg(self.keys.prefix())
            .arg(source)
            .arg(partitions);
        let rows: Vec<(u32, u64, String, String, u64)> = self.eval("partition owners", call)?;
        Ok(rows
            .into_iter()
            .map(|(partition, epoch, node, instance, until)| PartitionState {
                partition,
                epoch,
                owner: (!node.is_empty()).then(|| Lease {
                    node,
                    instance,
                    until: Timestamp::from_millis(until),
                }),
            })
            .collect())
    }
}
