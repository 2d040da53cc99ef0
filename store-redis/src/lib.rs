//! rebound-store-redis: the shared store. Several `rebound` processes (nodes) on one Redis 7
//! share every scheduled retry, fate, dead letter, audit line and source position through
//! [`RedisStore`], with the same contract as the runtime's embedded SQLite store (the runtime's
//! conformance suite runs on both), and more that only a shared store needs: claims of due
//! retries with leases and fencing tokens ([`ClaimQueue`](rebound_runtime::store::ClaimQueue)),
//! source partitions owned by lease, the fleet's nodes, the rule set of record, the canary and
//! the adaptive state: what any fleet needs, whatever topology it runs. A program keeps its
//! own records beside them, by its own scripts ([`RedisStore::eval`], [`ScriptCall`]) or as
//! small documents ([`RedisStore::put_doc`]).
//!
//! # Module map
//!
//! - `keys.rs`: every key, each beginning with `{NS}:` (one hash tag: a namespace is one
//!   Redis Cluster slot, so every script is cluster-legal).
//! - `scripts/*.lua`: every write is one Lua script, atomic on the server. Each script reads
//!   and checks first, then writes what cannot fail (Lua does not roll back), and is safe to
//!   run twice (a reply lost to a dropped connection leaves its outcome unknown, and the caller
//!   runs it again): first fate wins, upserts, fencing tokens. `apply.lua` takes the journal's
//!   batches; `claim.lua`, `extend.lua` and `reap.lua` are the claims.
//! - `store.rs`: the [`Store`](rebound_runtime::store::Store) trait (writes through
//!   `apply.lua`, reads as pipelined commands); `claims.rs`: the
//!   [`ClaimQueue`](rebound_runtime::store::ClaimQueue) trait.
//! - `wire.rs`: the ops as the scripts' arguments, and their answers back as records (the
//!   records' fields are the runtime's, [`rebound_runtime::store::fields`], shared with SQLite).
//! - [`fleet`]: nodes, partitions, the rule set of record, its hints, the canary, the
//!   adaptive state; `docs.rs`: small documents by kind; `script.rs`: a program's own scripts
//!   and commands on the store's connection.
//! - `conn.rs`: the connection. The `Store` trait is blocking (the journal thread and blocking
//!   tasks call it); the store drives a tokio
//!   [`ConnectionManager`](::redis::aio::ConnectionManager) (reconnects with backoff) on a
//!   small runtime of its own, so it can be called from any thread. Its errors are the
//!   runtime's [`StoreError::Backend`](rebound_runtime::store::StoreError::Backend), backend
//!   `redis`.
//! - `server.rs` (feature `test-server`): `TestServer`, a redis-server of a test's own.
//!
//! The URL's password never leaves this crate:
//! [`Store::location`](rebound_runtime::store::Store::location) and every error name the host,
//! port, database and namespace only.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod claims;
mod conn;
mod docs;
pub mod fleet;
mod keys;
mod script;
#[cfg(feature = "test-server")]
mod server;
mod store;
pub mod stream;
mod wire;

pub use conn::{RedisOptions, ServerCheck, ServerProblem, check_url, url_has_password};
pub use fleet::{
    Held, Join, Member, NodeBreaker, NodeReport, NodeStatus, Owned, Pushed, RedisFleetState,
    RuleRecord, RulesHint, RulesNotifications,
};
pub use keys::Keys;
/// The Redis client the store speaks through, for a program's own scripts and commands
/// ([`RedisStore::eval`], [`RedisStore::query`]): its `Script`, `pipe`, `FromRedisValue`.
pub use redis;
pub use script::ScriptCall;
#[cfg(feature = "test-server")]
pub use server::TestServer;

use std::sync::{Arc, OnceLock};

use conn::Io;
use rebound_runtime::store::{Message, Offset, OffsetOf};

/// The shared store on one Redis. Cheap to clone (one connection, shared).
#[derive(Clone)]
pub struct RedisStore {
    io: Io,
    keys: Keys,
    /// How a message's offset names its source (set by [`RedisStore::name_offsets`]).
    offsets: Arc<OnceLock<OffsetOf>>,
    /// The stream whose custody acks the store's writes carry (set by
    /// [`RedisStore::ack_custody_of`]).
    custody: Arc<OnceLock<StreamCustody>>,
    /// The server and database, as `redis://HOST:PORT/DB` (no credentials).
    server: String,
}

/// A Redis stream read by a consumer group on the store's own server, whose custody acks the
/// store sends in the same script as the writes that take custody (`sources.md`: "with
/// `--store redis` on the same server, the store write and the `XACK` in one script").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCustody {
    /// The stream's key.
    pub stream: String,
    /// The consumer group.
    pub group: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("location", &self.io.location())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the Redis at `options.url` (waits for the first connection, up to the
    /// options' connect timeout) and uses the namespace `options.namespace`.
    pub fn connect(options: &RedisOptions) -> rebound_runtime::store::Result<RedisStore> {
        let io = Io::connect(options)?;
        Ok(RedisStore {
            keys: Keys::new(&options.namespace),
            io,
            offsets: Arc::default(),
            custody: Arc::default(),
            server: conn::redacted(&options.url),
        })
    }

    /// Names the source and position of a message's [`offset`](rebound_runtime::store::Message::offset)
    /// for the writes that carry a message (a schedule, a dead letter), as
    /// [`DurableBuilder::offsets`](rebound_runtime::durable::DurableBuilder::offsets) does for acked fates:
    /// such a write of a message its source's committed position covers is refused as
    /// [`Applied::FateAlreadyKnown`](rebound_runtime::store::Applied::FateAlreadyKnown) (acked), so the
    /// acked fates a position prunes still win over a late write from another node. Without
    /// it, only kept fates do. Only the first call counts; every clone shares it.
    pub fn name_offsets(&self, f: impl Fn(&Message) -> Option<Offset> + Send + Sync + 'static) {
        let _ = self.offsets.set(Box::new(f));
    }

    /// From now on, every write that takes custody of a message of `custody.stream` (a
    /// retry's schedule, a dead letter: ids `STREAM/ENTRY-ID`) also acknowledges its entry to
    /// the group (`XACK`) in the same script, atomically with the write: no crash can come
    /// between the store's commit and the broker's ack. The stream source is then told not to
    /// send those acks itself ([`StreamOptions::store_acks`](stream::StreamOptions::store_acks)).
    /// The stream must be on this store's server and database. Set once; false if a stream
    /// was already set.
    pub fn ack_custody_of(&self, custody: StreamCustody) -> bool {
        self.custody.set(custody).is_ok()
    }

    /// Whether the Redis URL `url` names this store's server and database (host and port as
    /// written: `localhost` is not `127.0.0.1`). False if it does not parse.
    pub fn serves(&self, url: &str) -> bool {
        redis::IntoConnectionInfo::into_connection_info(url).is_ok()
            && conn::redacted(url) == self.server
    }

    /// The namespace's keys.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// What the server is and how it is configured, for the start-up checks
    /// ([`ServerCheck::problems`]).
    pub fn check_server(&self) -> rebound_runtime::store::Result<ServerCheck> {
        self.io.check_server()
    }

    /// Round trips to the server so far (each script call, command or pipeline is one), for
    /// `rebound_store_round_trips_total`.
    pub fn round_trips(&self) -> u64 {
        self.io.round_trips()
    }

    /// True if the server answers a `PING` within `within` (readiness: no reconnection is
    /// waited for beyond it).
    pub fn ping(&self, within: std::time::Duration) -> bool {
        self.io.ping(within)
    }
}
