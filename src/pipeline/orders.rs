//! The orders the bundled spout generates: stable ids (`order-000001`…), a business type among
//! `ORDER`, `PAYMENT` and `INVENTORY`, and a JSON payload, all derived from the order number
//! (and a seed), so every run of the same size sees the same orders.

use std::fmt::Write as _;
use std::sync::Arc;

use rebound_runtime::topology::Message;

/// The source name the order spout commits its position under.
pub const SOURCE: &str = "order-spout";

/// The id of order `n`: `order-000042`.
pub fn order_id(n: u64) -> String {
    format!("order-{n:06}")
}

/// The order number of an id made by [`order_id`].
pub fn position_of(id: &str) -> Option<u64> {
    id.strip_prefix("order-")?.parse().ok()
}

/// SplitMix64's finaliser: a well-mixed 64-bit value from any input.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A uniform number in `[0, 1)` from `seed`, the order number and a salt naming the question.
pub(crate) fn unit(seed: u64, n: u64, salt: u64) -> f64 {
    let h = mix(seed ^ mix(n ^ mix(salt)));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Business types and their shares of the orders.
pub const BIZ: [(&str, f64); 3] = [("ORDER", 0.5), ("PAYMENT", 0.3), ("INVENTORY", 0.2)];

const CURRENCIES: [&str; 3] = ["EUR", "USD", "GBP"];

/// What kind of payload an order carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Well-formed and valid.
    Good,
    /// Not JSON at all (cut off mid-way): the parse bolt fails it with `BAD_JSON`.
    Malformed,
    /// JSON, but an invalid order: the parse bolt fails it with `VALIDATION_FAILED`.
    Invalid,
}

/// Makes the orders of a run.
#[derive(Clone, Debug)]
pub struct OrderGen {
    seed: u64,
    malformed: f64,
    invalid: f64,
    biz: [Arc<str>; 3],
    buf: String,
}

impl OrderGen {
    /// Orders for `seed`, with these shares of malformed and invalid payloads.
    pub fn new(seed: u64, malformed: f64, invalid: f64) -> OrderGen {
        OrderGen {
            seed,
            malformed,
            invalid,
            biz: BIZ.map(|(name, _)| Arc::from(name)),
            buf: String::with_capacity(160),
        }
    }

    fn biz_index(&self, n: u64) -> usize {
        let u = unit(self.seed, n, 1);
        let mut acc = 0.0;
        for (i, (_, share)) in BIZ.iter().enumerate() {
            acc += share;
            if u < acc {
                return i;
            }
        }
        BIZ.len() - 1
    }

    /// The business type of order `n`.
    pub fn biz(&self, n: u64) -> &Arc<str> {
        &self.biz[self.biz_index(n)]
    }

    /// The payload kind of order `n`.
    pub fn shape(&self, n: u64) -> Shape {
        let u = unit(self.seed, n, 2);
        if u < self.malformed {
            Shape::Malformed
        } else if u < self.malformed + self.invalid {
            Shape::Invalid
        } else {
            Shape::Good
        }
    }

    /// Order `n` as a message.
    pub fn message(&mut self, n: u64) -> Message {
        let id = order_id(n);
        let h = mix(self.seed ^ mix(n));
        let customer = h % 10_000;
        let amount_cents = 100 + (h >> 16) % 50_000;
        let items = 1 + (h >> 40) % 9;
        let currency = CURRENCIES[((h >> 50) % 3) as usize];
        self.buf.clear();
        let _ = match self.shape(n) {
            Shape::Good => write!(
                self.buf,
                r#"{{"order":"{id}","customer":"c-{customer}","amount_cents":{amount_cents},"currency":"{currency}","items":{items}}}"#
            ),
            // Cut off in the middle of a key, as a truncated write would leave it.
            Shape::Malformed => write!(
                self.buf,
                r#"{{"order":"{id}","customer":"c-{customer}","amou"#
            ),
            Shape::Invalid => write!(
                self.buf,
                r#"{{"order":"{id}","customer":"c-{customer}","amount_cents":{amount_cents},"currency":"{currency}","items":0}}"#
            ),
        };
        let biz = self.biz[self.biz_index(n)].clone();
        Message::new(id, biz, self.buf.clone().into_bytes()).with_offset(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sort_like_numbers() {
        assert_eq!(order_id(42), "order-000042");
        assert_eq!(position_of("order-000042"), Some(42));
        assert_eq!(position_of(&order_id(1_234_567)), Some(1_234_567));
        assert_eq!(position_of("nope-1"), None);
    }

    #[test]
    fn orders_are_deterministic_and_mixed() {
        let mut a = OrderGen::new(7, 0.01, 0.01);
        let mut b = OrderGen::new(7, 0.01, 0.01);
        let mut counts = [0usize; 3];
        let mut shapes = [0usize; 3];
        for n in 1..=20_000 {
            let (ma, mb) = (a.message(n), b.message(n));
            assert_eq!(ma, mb);
            counts[a.biz_index(n)] += 1;
            shapes[a.shape(n) as usize] += 1;
        }
        for (i, (_, share)) in BIZ.iter().enumerate() {
            let got = counts[i] as f64 / 20_000.0;
            assert!((got - share).abs() < 0.02, "{i}: {got}");
        }
        assert!(shapes[1] > 100 && shapes[1] < 300, "{shapes:?}");
        assert!(shapes[2] > 100 && shapes[2] < 300, "{shapes:?}");
    }
}
