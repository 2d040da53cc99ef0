//! The seam between a topology's adaptive state and a fleet's (`operations.md`, "One fleet,
//! one budget"): [`FleetState`], implemented by a shared store (the Redis store's
//! `RedisFleetState`), never known to the runtime by name. The runtime knows no store client:
//! it hands the trait a [`Push`] (what this node counted since its last sync, what it reads,
//! the breakers it opened, its heat) and gets back the fleet's [`Totals`] in one round trip.
//!
//! A decision never calls the trait: one sync thread does ([`FleetSync`](super::FleetSync)),
//! every [`SYNC_EVERY`], and the gate reads the last totals from memory. Without a shared
//! store there is no `FleetState`, and the gate is the process's own ([`Scope::Alone`]).

use std::time::Duration;

use crate::store::StoreError;

/// How often a node syncs its adaptive state with the fleet's (the spec's 100–250 ms).
pub const SYNC_EVERY: Duration = Duration::from_millis(200);

/// A node is live for the fleet's state while it synced within this long (the store's clock).
pub const LIVE_WITHIN: Duration = Duration::from_secs(2);

/// Which adaptive state is in force (`rebound_adaptive_scope`, `/v1/overview`'s
/// `adaptive_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// No shared state at all (a store of one process): the gate is the process's, as it
    /// always was.
    Alone,
    /// Synced with the fleet: budgets admit against the fleet's totals, breakers follow the
    /// fleet's records.
    Fleet,
    /// The shared store did not answer the last sync: the node's own state, budgets' floors
    /// divided by the last known number of live nodes, until a sync answers again.
    Node,
}

impl Scope {
    /// `fleet` or `node` (`Alone` reads `node`: the state is the node's).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Fleet => "fleet",
            Scope::Alone | Scope::Node => "node",
        }
    }
}

/// What a fleet counter counts: its kind, the budget or breaker (and key) it is of.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CounterOf {
    /// First deliveries of a budget's biz.
    Firsts(String),
    /// Retries fired under a budget.
    Fired(String),
    /// Finished trees of a breaker's scope, for one key.
    Samples(String, String),
    /// The failed ones among them.
    Failed(String, String),
    /// Held retries a breaker's key (or the fuse's, breaker `fuse`, key `""`) released during
    /// the ramp that followed the opening of the fleet's record at this epoch.
    Released(String, String, u64),
}

/// One counter of the fleet, counted over a sliding window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Counter {
    /// What it counts.
    pub of: CounterOf,
    /// The window it is read over (real time).
    pub window: Duration,
}

impl Counter {
    /// Its name on the store: `f:BUDGET`, `r:BUDGET`, `s:BREAKER\x1fKEY`, `x:BREAKER\x1fKEY`,
    /// `l:BREAKER\x1fKEY\x1fEPOCH` (`\x1f`, the unit separator, appears in no id or key the
    /// rules can write).
    ///
    /// ```
    /// use rebound_runtime::adaptive::{Counter, CounterOf};
    /// use std::time::Duration;
    /// let c = Counter { of: CounterOf::Samples("gw".into(), "eu".into()), window: Duration::from_secs(10) };
    /// assert_eq!(c.name(), "s:gw\u{1f}eu");
    /// ```
    pub fn name(&self) -> String {
        match &self.of {
            CounterOf::Firsts(b) => format!("f:{b}"),
            CounterOf::Fired(b) => format!("r:{b}"),
            CounterOf::Samples(b, k) => format!("s:{b}\u{1f}{k}"),
            CounterOf::Failed(b, k) => format!("x:{b}\u{1f}{k}"),
            CounterOf::Released(b, k, e) => format!("l:{b}\u{1f}{k}\u{1f}{e}"),
        }
    }
}

/// A breaker (or the fuse: breaker `fuse`, key `""`) that opened on this node, sent with the
/// epoch of the fleet's record it knew: the store opens the record only if its epoch is still
/// that one (the first opener wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// The breaker's id.
    pub breaker: String,
    /// Its key (`""` without `per`).
    pub key: String,
    /// The record's epoch this node knew (0: none).
    pub known_epoch: u64,
}

/// One round trip's worth from this node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Push {
    /// Increasing per process; a push whose `seq` the store already counted adds nothing again
    /// (it is sent again, the same, after a lost reply).
    pub seq: u64,
    /// Counts to add, each to its counter's bucket of now.
    pub adds: Vec<(Counter, u64)>,
    /// Counters whose fleet total to read.
    pub reads: Vec<Counter>,
    /// Breakers this node opened since its last sync.
    pub openings: Vec<Opening>,
    /// This node's heat per biz now (absolute values, replacing what it reported before).
    pub heat: Vec<(String, f64)>,
}

/// A breaker record of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerRecord {
    /// The breaker's id.
    pub breaker: String,
    /// Its key.
    pub key: String,
    /// Its epoch: how many times the fleet opened it.
    pub epoch: u64,
    /// How long ago it was last opened, by the store's clock.
    pub opened_ago: Duration,
}

/// What the fleet holds, read in the same round trip as the push was added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Each counter of the push's `reads`, in order: the fleet's total over its window (this
    /// push's adds included).
    pub counts: Vec<u64>,
    /// Every breaker record.
    pub breakers: Vec<BreakerRecord>,
    /// The live nodes (this one included, so at least 1).
    pub nodes: usize,
    /// The heat the other live nodes reported, per biz, and how long ago each reported it.
    pub heat: Vec<(String, f64, Duration)>,
}

/// The fleet's adaptive state on a shared store: one call, one round trip, blocking (called
/// on the sync thread only).
pub trait FleetState: Send + Sync + std::fmt::Debug {
    /// Adds `push` to the fleet's counters (unless its `seq` was counted already), opens the
    /// records of its openings whose epoch is still the known one, stores its heat, and reads
    /// the totals, the records, the live nodes and the others' heat.
    fn sync(&self, push: &Push) -> Result<Totals, StoreError>;
}
