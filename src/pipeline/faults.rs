//! The faults the store bolt injects, decided per order and attempt by a seeded hash, so a run
//! is reproducible: the same order fails the same way at the same attempt, run after run.
//!
//! Two kinds:
//!
//! - **Per order** (the same at every attempt): a poison order that crashes the writer
//!   (`PANIC`, every time), an `INVENTORY` order whose stock never arrives
//!   (`STOCK_INSUFFICIENT`, every time; half of the orders' stock failures carry a held
//!   `reservation`, retried only while it holds), and a `PAYMENT` the gateway refuses for good
//!   (`PAY_FAILED`, given up at once). The rules give them up, after their retries or at once.
//! - **Per attempt** (transient): `DB_LOCK_WAIT`, `NET_TIMEOUT`, `RATE_LIMITED` (with a
//!   `retry_after` of 1–5 s), `PAY_PROCESSING` for `PAYMENT`, late stock for `INVENTORY`, a slow
//!   write that outlasts the message timeout (the tree fails with `TIMEOUT`; the write still
//!   lands later, so the retry's write is a duplicate the idempotent store absorbs), and a rare
//!   crash (`PANIC`).
//!
//! With the default rates most messages succeed at once, about one in seven is retried, and
//! about 1.8% end as dead letters (malformed and invalid payloads, poison orders, refused payments, stock that
//! never came, payments still processing after their retries).
//!
//! **Faults heal.** A dead letter replayed by an operator or redriven by its label starts the
//! order's next *life* ([`Lives`]: the letters stored for it). By then the trouble has passed,
//! as it would have in a real recovery: the stock that never came has arrived, and each
//! attempt meets the transient faults afresh (rolled with the life in the seed), at their
//! usual rates. So a replayed order is written at once with the probability a first delivery
//! has (about 93% for `ORDER`, 68% for `PAYMENT`, 83% for `INVENTORY`), and most of the rest
//! after their retries. A poison order is a bug in our code: it crashes again (and malformed
//! or invalid payloads fail at parsing again), as no replay could fix them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::orders::unit;
use rebound_runtime::topology::Failure;

/// Fault rates (probabilities, 0 to 1) and the seed that makes them reproducible.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Seeds every roll (and the orders' content).
    pub seed: u64,
    /// Orders whose payload is not JSON (`BAD_JSON` at the parse bolt).
    pub malformed: f64,
    /// Orders that are JSON but invalid (`VALIDATION_FAILED` at the parse bolt).
    pub invalid: f64,
    /// Orders that crash the store bolt at every attempt (`PANIC`).
    pub poison: f64,
    /// `INVENTORY` orders whose stock never arrives (`STOCK_INSUFFICIENT` at every attempt).
    pub out_of_stock: f64,
    /// `INVENTORY` orders whose stock failures carry a held reservation (the attr
    /// `reservation`: the shipped rules retry those only while the reservation holds).
    pub reserved: f64,
    /// `PAYMENT` orders the gateway refuses for good (`PAY_FAILED` at every attempt: the
    /// shipped rules give them up at once).
    pub pay_refused: f64,
    /// Per attempt: a lock wait (`DB_LOCK_WAIT`).
    pub db_lock: f64,
    /// Per attempt: a network timeout (`NET_TIMEOUT`).
    pub net_timeout: f64,
    /// Per attempt: rate limited (`RATE_LIMITED`, with a `retry_after`).
    pub rate_limited: f64,
    /// Per attempt, `PAYMENT` only: the gateway is still processing (`PAY_PROCESSING`).
    pub pay_processing: f64,
    /// Per attempt, `INVENTORY` only: stock not there yet (`STOCK_INSUFFICIENT`).
    pub stock_late: f64,
    /// Per attempt: a write so slow that the tree times out (`TIMEOUT`).
    pub slow_write: f64,
    /// Per attempt: the store bolt crashes (`PANIC`).
    pub panic: f64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            seed: 0x5EED_F00D,
            malformed: 0.004,
            invalid: 0.003,
            poison: 0.0002,
            out_of_stock: 0.03,
            reserved: 0.5,
            pay_refused: 0.005,
            db_lock: 0.03,
            net_timeout: 0.02,
            rate_limited: 0.015,
            pay_processing: 0.25,
            stock_late: 0.10,
            slow_write: 0.002,
            panic: 0.0005,
        }
    }
}

impl Faults {
    /// No faults at all (every order is written at its first attempt).
    pub fn none() -> Faults {
        Faults {
            seed: Faults::default().seed,
            malformed: 0.0,
            invalid: 0.0,
            poison: 0.0,
            out_of_stock: 0.0,
            reserved: 0.0,
            pay_refused: 0.0,
            db_lock: 0.0,
            net_timeout: 0.0,
            rate_limited: 0.0,
            pay_processing: 0.0,
            stock_late: 0.0,
            slow_write: 0.0,
            panic: 0.0,
        }
    }

    /// What happens when order `n` of type `biz` is written at `attempt` of its first life.
    pub fn roll(&self, n: u64, biz: &str, attempt: u32) -> Fault {
        self.roll_in_life(n, biz, attempt, 0)
    }

    /// What happens when order `n` of type `biz` is written at `attempt` of its life `life`
    /// (0: its first; one more after each dead letter replayed or redriven): from the second
    /// life on, its stock has arrived and its transient faults are rolled afresh.
    pub fn roll_in_life(&self, n: u64, biz: &str, attempt: u32, life: u32) -> Fault {
        if unit(self.seed, n, 10) < self.poison {
            return Fault::Panic;
        }
        if life == 0 && biz == "INVENTORY" && unit(self.seed, n, 11) < self.out_of_stock {
            return Fault::Fail(self.stock(
                n,
                Failure::new("STOCK_INSUFFICIENT", "the item is out of stock"),
            ));
        }
        if life == 0 && biz == "PAYMENT" && unit(self.seed, n, 12) < self.pay_refused {
            return Fault::Fail(
                Failure::new("PAY_FAILED", "the payment gateway refused the card")
                    .with_attr("downstream", GATEWAY),
            );
        }
        // Attempts stay far below 1,000 (a rule's max_retries is at most 100), so each life's
        // salts are its own.
        let salt = 100 + 1000 * u64::from(life) + u64::from(attempt);
        let u = unit(self.seed, n, salt);
        let mut edge = 0.0;
        let mut next = |p: f64| {
            edge += p;
            u < edge
        };
        if next(self.panic) {
            return Fault::Panic;
        }
        if next(self.slow_write) {
            return Fault::Slow;
        }
        if next(self.db_lock) {
            return Fault::Fail(
                Failure::new("DB_LOCK_WAIT", "lock wait timeout exceeded on table orders")
                    .with_attr("table", "orders"),
            );
        }
        if next(self.net_timeout) {
            return Fault::Fail(Failure::new(
                "NET_TIMEOUT",
                "no answer from the order service",
            ));
        }
        if next(self.rate_limited) {
            let secs = 1 + (unit(self.seed, n, salt + 50) * 5.0) as u64;
            return Fault::Fail(
                Failure::new("RATE_LIMITED", "429 Too Many Requests")
                    .with_retry_after(Duration::from_secs(secs))
                    .with_attr("http_status", "429"),
            );
        }
        if biz == "PAYMENT" && next(self.pay_processing) {
            return Fault::Fail(
                Failure::new("PAY_PROCESSING", "the payment gateway is still processing")
                    .with_attr("downstream", GATEWAY),
            );
        }
        if biz == "INVENTORY" && next(self.stock_late) {
            return Fault::Fail(self.stock(
                n,
                Failure::new("STOCK_INSUFFICIENT", "stock not yet replenished"),
            ));
        }
        Fault::None
    }

    /// A stock failure of order `n`, from its warehouse, with its reservation if it holds one.
    fn stock(&self, n: u64, failure: Failure) -> Failure {
        let failure = failure.with_attr("warehouse", "central");
        if unit(self.seed, n, 13) < self.reserved {
            failure.with_attr("reservation", format!("R-{n:06}"))
        } else {
            failure
        }
    }
}

/// How many lives each order has had before the one it is in: the dead letters stored for it
/// in this process (and, on a store of one's own, before it: [`Lives::seed`]). A replay or a
/// redrive can only follow a stored letter, so a delivery of an order with `k` letters is in
/// its life `k`. On a shared store, a letter stored by another node is not counted here: its
/// replay fails as its first life did.
#[derive(Debug, Default)]
pub struct Lives {
    letters: Mutex<HashMap<u64, u32>>,
    /// False until the first letter: most deliveries take no lock.
    any: AtomicBool,
}

impl Lives {
    /// A dead letter of order `n` was stored.
    pub fn dead_lettered(&self, n: u64) {
        let mut letters = self.letters.lock().unwrap_or_else(PoisonError::into_inner);
        *letters.entry(n).or_default() += 1;
        self.any.store(true, Ordering::Release);
    }

    /// Counts the letters stored before this process started: `orders`, one per letter.
    pub fn seed(&self, orders: impl IntoIterator<Item = u64>) {
        for n in orders {
            self.dead_lettered(n);
        }
    }

    /// The life order `n` is in (0: it never was dead-lettered).
    pub fn of(&self, n: u64) -> u32 {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let letters = self.letters.lock().unwrap_or_else(PoisonError::into_inner);
        letters.get(&n).copied().unwrap_or(0)
    }
}

/// The dependency the payment failures come from (their `downstream` attr): the one an
/// outage takes down.
pub const GATEWAY: &str = "payment-gateway";

/// A correlated outage (`rebound run --outage DUR`): for `length` from `start` (rules' time
/// since the run began), the payment gateway answers nothing: every `PAYMENT` order's write
/// fails with `NET_TIMEOUT` from `downstream` `payment-gateway`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// When it begins, after the run's start (rules' time).
    pub start: Duration,
    /// How long it lasts (rules' time).
    pub length: Duration,
}

impl Outage {
    /// An outage of `length` beginning 2 s (rules' time) into the run: the breakers have
    /// seen the gateway healthy, and new orders are still flowing (a fast machine takes in
    /// 50,000 orders in well under a minute of rules' time at `--time-scale 100`).
    pub fn of(length: Duration) -> Outage {
        Outage {
            start: Duration::from_secs(2),
            length,
        }
    }

    /// The failure every `PAYMENT` write meets during the outage.
    pub fn failure() -> Failure {
        Failure::new("NET_TIMEOUT", "no answer from the payment gateway (outage)")
            .with_attr("downstream", GATEWAY)
    }
}

/// The outcome of a roll.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Write the order.
    None,
    /// Fail at once with this failure.
    Fail(Failure),
    /// Write it, but so slowly that the tree times out first.
    Slow,
    /// Crash the bolt.
    Panic,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolls_are_reproducible_and_near_their_rates() {
        let f = Faults::default();
        let mut fails = 0;
        let mut slow = 0;
        for n in 1..=100_000u64 {
            let a = f.roll(n, "ORDER", 1);
            assert_eq!(a, f.roll(n, "ORDER", 1));
            match a {
                Fault::Fail(_) => fails += 1,
                Fault::Slow => slow += 1,
                _ => {}
            }
        }
        // db_lock + net_timeout + rate_limited = 6.5%
        assert!((6_000..7_000).contains(&fails), "{fails}");
        assert!((150..250).contains(&slow), "{slow}");
        assert_eq!(Faults::none().roll(5, "PAYMENT", 1), Fault::None);
    }

    #[test]
    fn out_of_stock_is_per_order_and_late_stock_per_attempt() {
        let f = Faults {
            out_of_stock: 1.0,
            ..Faults::none()
        };
        for attempt in 1..5 {
            assert!(
                matches!(f.roll(9, "INVENTORY", attempt), Fault::Fail(x) if x.code == "STOCK_INSUFFICIENT")
            );
        }
        assert_eq!(f.roll(9, "ORDER", 1), Fault::None);
    }

    #[test]
    fn a_later_life_heals_the_stock_keeps_the_poison_and_rolls_transients_afresh() {
        let out = Faults {
            out_of_stock: 1.0,
            ..Faults::none()
        };
        assert!(matches!(
            out.roll_in_life(9, "INVENTORY", 1, 0),
            Fault::Fail(_)
        ));
        assert_eq!(out.roll_in_life(9, "INVENTORY", 1, 1), Fault::None);
        let poison = Faults {
            poison: 1.0,
            ..Faults::none()
        };
        assert_eq!(poison.roll_in_life(9, "ORDER", 1, 3), Fault::Panic);
        // Payments that failed in their first life: about 68% of them written at the
        // first attempt of the next (the rate of any first delivery), and not the same ones.
        let f = Faults::default();
        let failed_first: Vec<u64> = (1..=100_000u64)
            .filter(|&n| matches!(f.roll(n, "PAYMENT", 1), Fault::Fail(_)))
            .collect();
        let healed = failed_first
            .iter()
            .filter(|&&n| f.roll_in_life(n, "PAYMENT", 1, 1) == Fault::None)
            .count() as f64
            / failed_first.len() as f64;
        assert!((0.62..0.74).contains(&healed), "{healed}");
    }

    #[test]
    fn lives_count_the_letters_of_each_order() {
        let lives = Lives::default();
        assert_eq!(lives.of(7), 0);
        lives.seed([7, 7, 9]);
        lives.dead_lettered(7);
        assert_eq!((lives.of(7), lives.of(9), lives.of(8)), (3, 1, 0));
    }
}
