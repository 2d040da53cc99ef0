//! How long the [`Journal`](super::Journal) keeps trying a store that refuses its writes, and
//! what it says when it stops.
//!
//! A store that cannot be written (a full disk, a read-only or immutable file, a database
//! locked by someone else) is retried with backoff, each failure logged at WARN with its
//! cause, for at most [`JournalOptions::give_up_after`](super::JournalOptions::give_up_after).
//! Then the journal gives up: it publishes a [`JournalFailure`] and commits nothing more, so
//! that what it committed before stays a consistent prefix (positions never run ahead of the
//! fates they cover). Nothing it dropped is lost: a write that never committed leaves its
//! message uncommitted at the source, and the next run delivers it again.

use rebound_engine::backoff::Doubling;
use std::time::Duration;

use crate::time::Instant;

use crate::store::StoreError;

/// Why the journal stopped writing: the store refused every commit for the whole bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{location} cannot be written: {cause} (retried for {}s; what was committed before is kept, \
     and a run started again once the cause is fixed continues)",
    .retried.as_secs()
)]
pub struct JournalFailure {
    /// The store (for SQLite, its file).
    pub location: String,
    /// The last error.
    pub cause: String,
    /// How long the journal kept trying.
    pub retried: Duration,
}

/// The retries of one stretch of failures: from the first failed commit until one succeeds.
pub(super) struct Retrying {
    first: Instant,
    attempt: u32,
    bound: Duration,
}

impl Retrying {
    pub(super) fn new(bound: Duration) -> Retrying {
        Retrying {
            first: crate::time::now(),
            attempt: 0,
            bound,
        }
    }

    /// Logs `error`, then either waits before the next try (`Ok`) or, once the bound has
    /// passed, gives up with the failure to publish.
    pub(super) fn failed(
        &mut self,
        error: &StoreError,
        writes: usize,
        location: impl FnOnce() -> String,
    ) -> Result<(), JournalFailure> {
        let retried = self.first.elapsed();
        if retried >= self.bound {
            let failure = JournalFailure {
                location: location(),
                cause: error.to_string(),
                retried,
            };
            tracing::error!(%failure, "the journal gives up");
            return Err(failure);
        }
        let left = self.bound - retried;
        tracing::warn!(
            error = %error,
            writes,
            attempt = self.attempt,
            gives_up_in = ?Duration::from_secs(left.as_secs()),
            "the store refused a commit; retrying (nothing is dropped)"
        );
        std::thread::sleep(backoff(self.attempt).min(left));
        self.attempt += 1;
        Ok(())
    }
}

/// 10 ms, doubling, at most 5 s.
fn backoff(attempt: u32) -> Duration {
    Doubling::new(Duration::from_millis(10), Duration::from_secs(5))
        .after(attempt.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_up_once_the_bound_has_passed_and_names_the_store() {
        let mut retrying = Retrying::new(Duration::from_millis(30));
        let error = StoreError::WriterClosed;
        let mut tries = 0;
        let failure = loop {
            tries += 1;
            if let Err(f) = retrying.failed(&error, 3, || "/data/rebound.db".into()) {
                break f;
            }
        };
        assert!(tries > 1, "it retried first");
        assert!(failure.retried >= Duration::from_millis(30));
        let text = failure.to_string();
        assert!(
            text.starts_with("/data/rebound.db cannot be written: the store's journal has stopped"),
            "{text}"
        );
    }

    #[test]
    fn backoff_doubles_up_to_five_seconds() {
        assert_eq!(backoff(0), Duration::from_millis(10));
        assert_eq!(backoff(3), Duration::from_millis(80));
        assert_eq!(backoff(40), Duration::from_secs(5));
    }
}
