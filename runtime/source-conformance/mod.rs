//! The broker-source contract (`sources.md`, "Custody" and "What users can count on") as a
//! conformance suite (feature `source-conformance`): every case takes a [`SourceHarness`], a
//! broker of the test's own that the case can publish to, stop, kill and restart, and the
//! source under test over it, so that every source runs the same cases, one line each:
//!
//! ```text
//! rebound_runtime::source_suite!(redis_streams, RedisHarness);
//! ```
//!
//! The cases (`cases.rs`): every message processed once and acknowledged, with an hour-long
//! retry holding nothing at the broker; the unacknowledged count never above the bound plus a
//! read batch; a consumer killed before custody gets what it held again; a redelivered message
//! the store already has custody of acknowledged and not processed again; the broker killed
//! and restarted from its persistence losing nothing; a poison message ending as a dead letter
//! with nothing left pending; ordered keys kept in order; credentials never shown.
//!
//! Like the store's suite, the files live beside the crate's source: a test kit, built only
//! with the feature, not part of the framework.

use std::time::Duration;

use crate::durable::Durable;
use crate::topology::Spout;

#[allow(missing_docs)]
mod cases;
mod kit;

pub use cases::*;

/// How a case wants its source.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// The consumer's name (the node's): a source started again under the same name is the
    /// same consumer, restarted.
    pub consumer: String,
    /// The most messages it may hold unacknowledged at the broker.
    pub max_unacked: u64,
    /// Messages per read (the suite uses 10).
    pub batch: usize,
    /// The store the source asks which redelivered messages it already has custody of.
    pub durable: Option<Durable>,
}

/// A broker of the test's own, and the source under test over it.
pub trait SourceHarness: Sized + Send + 'static {
    /// A fresh broker (its own process, port and data directory), with persistence on.
    fn start() -> Self;

    /// The source under test, reading the suite's stream or subject as `spec` says. Called
    /// inside a tokio runtime.
    fn source(&self, spec: SourceSpec) -> Box<dyn Spout>;

    /// Publishes one message (durably: it survives the broker's kill once this returns), with
    /// its biz, its ordering key if any, and its payload.
    fn publish(&self, biz: &str, key: Option<&str>, payload: &str);

    /// The messages the broker holds delivered and not acknowledged, for the suite's consumers
    /// (Redis: the group's pending entries; JetStream: the consumer's ack pending).
    fn unacked(&self) -> u64;

    /// What a consumer killed before custody left unacknowledged, as the broker counts it just
    /// after the kill. By default [`unacked`](Self::unacked): Redis and JetStream keep a dead
    /// consumer's messages pending until they are claimed or `ack_wait` passes. A broker that
    /// puts them back in the queue the moment the connection closes (RabbitMQ) has nothing
    /// unacknowledged by then: its harness counts what the queue holds, ready and
    /// unacknowledged (nothing acknowledged, nothing lost).
    fn unacked_after_death(&self) -> u64 {
        self.unacked()
    }

    /// Kills the broker (SIGKILL).
    fn kill(&mut self);

    /// Starts the killed broker again, from its persistence, on the same address.
    fn restart(&mut self);

    /// How long after a consumer's death the broker hands what it held to a restarted
    /// consumer of the same name (0: at once).
    fn redelivery_after(&self) -> Duration;

    /// Every text the source shows of where it reads (a URL, as logs and errors show it), and
    /// the secret that must never be in it (the password the harness's URL carries), if the
    /// harness runs its broker with one.
    fn shown(&self) -> Option<(Vec<String>, String)> {
        None
    }
}

/// Runs every case of the suite over harness `$harness` (a [`SourceHarness`]), as
/// `#[test]`s in module `$name`, each on a multi-threaded tokio runtime of its own.
#[macro_export]
macro_rules! source_suite {
    ($name:ident, $harness:ty) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::source_suite!(@cases $harness;
                every_message_is_processed_once_and_an_hour_long_retry_holds_nothing_at_the_broker,
                the_unacknowledged_stay_within_the_bound_plus_a_batch,
                a_consumer_killed_before_custody_gets_what_it_held_again,
                a_redelivered_message_in_the_store_s_custody_is_acknowledged_not_processed,
                the_broker_killed_and_restarted_loses_nothing,
                a_poison_message_ends_as_a_dead_letter_and_nothing_stays_pending,
                ordered_keys_stay_in_order_across_retries,
                credentials_are_never_shown,
            );
        }
    };
    (@cases $harness:ty; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a tokio runtime")
                    .block_on($crate::sources::conformance::$case::<$harness>());
            }
        )*
    };
}
