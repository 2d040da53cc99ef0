//! [`Config`]: timeouts, pending limits, acker count, retry mix, retry fuse and ordered keys.

use std::sync::Arc;
use std::time::Duration;

/// The runtime settings of a topology. `Config::default()` gives the spec's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// A tuple tree not completed within this time fails with code `TIMEOUT` (default 30 s).
    pub message_timeout: Duration,
    /// At most this many trees in flight per spout task (default 1000). A message whose dead
    /// letter is being stored still counts, so slow storage slows the spout instead of piling
    /// up.
    pub max_spout_pending: usize,
    /// Acker tasks; root ids are partitioned across them (default 1).
    pub ackers: usize,
    /// How due retries and new messages are mixed (default: at most 3 retries per new one).
    pub retry_mix: RetryMix,
    /// When retries are held back because too much is failing.
    pub fuse: FuseConfig,
    /// Capacity of each task's input channel, in batches (default 64).
    pub channel_capacity: usize,
    /// Most tuples sent to one task in one batch (default 256). Batches are sent as soon as a
    /// task has handled what it had, so a small load gives small batches, not waiting.
    pub batch_size: usize,
    /// How long a spout task waits after its spout said [`Idle`](crate::topology::NextMessage::Idle)
    /// before asking again, unless something else wakes it first (default 1 ms).
    pub spout_idle_wait: Duration,
    /// Which messages keep their key's order through retries (default: none).
    pub ordering: OrderingConfig,
    /// The largest payload a spout may hand out, in bytes (default 1 MiB). A larger one is
    /// dead-lettered at once, undelivered, with code [`PAYLOAD_TOO_LARGE`](super::codes::PAYLOAD_TOO_LARGE),
    /// as a message its spout refuses is ([`NextMessage::Refused`](super::NextMessage::Refused)):
    /// kept whole in its letter, never a crash nor a bolt handed more than it can hold.
    pub max_payload: usize,
}

/// The default [`Config::max_payload`]: 1 MiB.
pub const MAX_PAYLOAD: usize = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            message_timeout: Duration::from_secs(30),
            max_spout_pending: 1000,
            ackers: 1,
            retry_mix: RetryMix::default(),
            fuse: FuseConfig::default(),
            channel_capacity: 64,
            batch_size: 256,
            spout_idle_wait: Duration::from_millis(1),
            ordering: OrderingConfig::default(),
            max_payload: MAX_PAYLOAD,
        }
    }
}

/// The mix of due retries and new messages when both are available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryMix {
    /// At most this many retries per new message (default 3). Retries also never wait behind
    /// more than one new message in a row, so neither side starves. 0 means new messages
    /// always go first.
    pub retries_per_new: u32,
}

impl Default for RetryMix {
    fn default() -> Self {
        RetryMix { retries_per_new: 3 }
    }
}

/// The retry fuse: while the share of failed trees among finished trees over `window` is at
/// least `threshold` (and at least `min_samples` trees finished in it), due retries stay in
/// the retry queue — held, not dropped — and new messages still flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FuseConfig {
    /// Set to false to never hold retries back (default true).
    pub enabled: bool,
    /// The sliding window the failure rate is measured over (default 10 s).
    pub window: Duration,
    /// The failure rate, in `0.0..=1.0`, at which the fuse opens (default 0.5).
    pub threshold: f64,
    /// Fewer finished trees than this in the window never open the fuse (default 500: the
    /// last failing retries of a batch run, all that finishes near its end, are too few to
    /// judge a dependency by).
    pub min_samples: u64,
}

impl Default for FuseConfig {
    fn default() -> Self {
        FuseConfig {
            enabled: true,
            window: Duration::from_secs(10),
            threshold: 0.5,
            min_samples: 500,
        }
    }
}

/// Ordered keys: while a message with key K is in flight or waits for a retry, later messages
/// with key K from the same spout task are held back, in source order, until it has its fate
/// (`docs/spec/runtime.md`, "Ordered keys").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderingConfig {
    /// The messages whose keys are ordered (default: none).
    pub ordered: Ordered,
    /// What a dead letter does to its key (default: the next message goes on).
    pub on_dead_letter: OnDeadLetter,
    /// At most this many held messages per spout task (default 10,000); at the bound the task
    /// takes no new messages from its spout until a key lets one go.
    pub max_held: usize,
}

/// The default `max_held`.
pub const DEFAULT_MAX_HELD: usize = 10_000;

impl Default for OrderingConfig {
    fn default() -> Self {
        OrderingConfig {
            ordered: Ordered::None,
            on_dead_letter: OnDeadLetter::Continue,
            max_held: DEFAULT_MAX_HELD,
        }
    }
}

/// Which messages keep their key's order (a message without a key never waits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Ordered {
    /// Ordering is off.
    #[default]
    None,
    /// Every message with a key.
    All,
    /// The messages of these biz types.
    Biz(Vec<Arc<str>>),
}

impl Ordered {
    /// True if no message is ordered.
    pub fn is_none(&self) -> bool {
        match self {
            Ordered::None => true,
            Ordered::All => false,
            Ordered::Biz(biz) => biz.is_empty(),
        }
    }

    /// True if messages of `biz` are ordered.
    pub fn covers(&self, biz: &str) -> bool {
        match self {
            Ordered::None => false,
            Ordered::All => true,
            Ordered::Biz(list) => list.iter().any(|b| &**b == biz),
        }
    }
}

/// What a dead-lettered message does to the later messages of its key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnDeadLetter {
    /// The next message of the key goes on once the dead letter is stored.
    #[default]
    Continue,
    /// The key stays blocked until an operator replays or skips the letter.
    Block,
}
