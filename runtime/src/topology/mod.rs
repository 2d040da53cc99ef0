//! The topology API: what a user writes.
//!
//! - [`Spout`] produces [`Message`]s and is told each one's fate (`ack` / `dead_lettered`).
//! - [`Bolt`] handles a [`Tuple`] and returns `Ok` (ack) or `Err(`[`Failure`]`)`; what it emits
//!   through the [`Emitter`] is anchored to its input and sent only on `Ok`.
//! - [`DeferredBolt`] takes each input as a [`PendingTuple`] to ack or fail later (batching,
//!   async work); a handle dropped un-acked fails at once with code `UNACKED`.
//! - [`TopologyBuilder`] wires them with a parallelism and [`Grouping`]s, and [`Config`] sets
//!   timeouts, `max_spout_pending`, ackers, the retry mix and the retry fuse.
//!
//! See `runtime/examples/word_count.rs` for a complete topology.

pub mod bolt;
pub mod builder;
pub mod config;
pub mod failure;
pub mod grouping;
pub mod history;
pub mod message;
pub mod spout;
pub mod tuple;

pub use bolt::{Bolt, DeferredBolt, Emitter, PendingTuple};
pub use builder::{BoltDeclarer, BuildError, Topology, TopologyBuilder};
pub use config::{
    Config, FuseConfig, MAX_PAYLOAD, OnDeadLetter, Ordered, OrderingConfig, RetryMix,
};
pub use failure::{Failure, codes};
pub use grouping::Grouping;
pub use history::{FailureRecord, Failures};
pub use message::{ClaimToken, Key, Message, MessageId, ROOT_FIELDS, RetryMeta};
pub use spout::{NextMessage, Spout};
pub use tuple::{Fields, Headers, Tuple, Value, Values};

/// Which task an instance runs as; passed to component factories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    /// The component's name.
    pub component: &'static str,
    /// This task's index within the component, `0..parallelism`.
    pub index: usize,
    /// The component's number of tasks.
    pub parallelism: usize,
}
