//! Letters deferred past a receiver's queue bound, read back from the store.
//!
//! A receiver's queue holds at most `queue_bound` letters and `queue_bytes` bytes. A letter
//! past either bound is not kept in memory: it is *deferred* (counted as
//! `rebound_alerts_total{result="deferred"}`), and from then on every new letter for that
//! receiver is deferred too, so the deferred ones are exactly those dead-lettered within one
//! window of time ([`Deferral`]). The letters are in the store anyway. Once the lane has
//! delivered what its queue held (the receiver answers again), it reads the window's letters
//! back through the integrator's [`AlertBacklog`], a page at a time, sends them, and lets new
//! letters into the queue again. Letters an operator replayed or skipped in the meantime are
//! not sent. A letter of the window's first or last millisecond that was queued before the
//! deferral began may arrive twice: each letter carries its `id` and `seq`.
//!
//! The deferral lives in memory: a process that stops while one is open says so (the
//! receiver, how many letters, and the window to list them by), and a restart does not send
//! them.

use serde_json::Value;

/// The letters deferred for one receiver: how many, and when they were dead-lettered (the
/// letters' `last_time_ms`, both ends included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferral {
    /// The first deferred letter's time.
    pub from_ms: u64,
    /// The last deferred letter's time (at least `from_ms`).
    pub to_ms: u64,
    /// How many letters were deferred.
    pub letters: u64,
}

impl Deferral {
    /// A deferral of one letter dead-lettered at `at_ms`.
    pub fn of(at_ms: u64) -> Deferral {
        Deferral {
            from_ms: at_ms,
            to_ms: at_ms,
            letters: 1,
        }
    }

    /// This one and `other`, as one window.
    pub fn merge(self, other: Deferral) -> Deferral {
        Deferral {
            from_ms: self.from_ms.min(other.from_ms),
            to_ms: self.to_ms.max(other.to_ms),
            letters: self.letters + other.letters,
        }
    }

    /// One more letter, dead-lettered at `at_ms`.
    pub fn add(&mut self, at_ms: u64) {
        *self = self.merge(Deferral::of(at_ms));
    }
}

/// Where a page of the backlog ends: opaque to the dispatcher, handed back for the next page.
/// What the two numbers mean is the backlog's (a store's: which of the receiver's labels,
/// and the row to read below; `None` from the top).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BacklogCursor {
    /// Which part of the backlog the next page is in.
    pub part: usize,
    /// Where in that part it begins (`None`: at its start).
    pub from: Option<i64>,
}

/// One page of a receiver's deferred letters.
#[derive(Debug, Default)]
pub struct BacklogPage {
    /// The letters, as the dispatcher is sent them (without the payload).
    pub letters: Vec<Value>,
    /// The next page's cursor; `None` after the last page.
    pub next: Option<BacklogCursor>,
}

/// Reads deferred letters back (the integrator's store). Called on a blocking thread.
pub trait AlertBacklog: Send + Sync + std::fmt::Debug {
    /// The open letters for `receiver` dead-lettered within `window`, at most `limit`, from
    /// `cursor` on (`None`: the first page). An error is said in words.
    fn page(
        &self,
        receiver: &str,
        window: &Deferral,
        cursor: Option<BacklogCursor>,
        limit: usize,
    ) -> Result<BacklogPage, String>;
}

/// The time a letter was dead-lettered, as the dispatcher is sent it (`last_time_ms`; 0 when
/// it has none).
pub fn letter_time_ms(letter: &Value) -> u64 {
    letter["last_time_ms"].as_u64().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferral_grows_to_cover_every_letter() {
        let mut d = Deferral::of(50);
        d.add(70);
        d.add(40);
        assert_eq!(
            d,
            Deferral {
                from_ms: 40,
                to_ms: 70,
                letters: 3
            }
        );
    }
}
