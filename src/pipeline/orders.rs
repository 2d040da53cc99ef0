//! The orders the bundled spout generates: stable ids (`order-000001`…), a business type among
//! `ORDER`, `PAYMENT` and `INVENTORY`, and a JSON payload, all derived from the order number
//! (and a seed), so every run of the same size sees the same orders. Each message's ordering
//! key is its order's id.
//!
//! Keyed (`rebound run --keyed`), message `n` is an *event* (`event-000001`…) of an order:
//! each order has one to three events, `created` (biz `ORDER`), `paid` (`PAYMENT`) and
//! `shipped` (`INVENTORY`), in that order, interleaved with other orders' events (see
//! [`event_at`]). An order's events all fall in one lane of [`LANES`] (message number mod 16),
//! so a fleet's partition holds every event of its orders.

use std::fmt::Write as _;
use std::sync::Arc;

use rebound_runtime::topology::{Key, Message, MessageId};

/// The source name the order spout commits its position under.
pub const SOURCE: &str = "order-spout";

/// The id of order `n`: `order-000042`.
pub fn order_id(n: u64) -> String {
    format!("order-{n:06}")
}

/// The id of event `n` of a keyed run: `event-000042`.
pub fn event_id(n: u64) -> String {
    format!("event-{n:06}")
}

/// The id of message `n` of a run, keyed or not.
pub fn message_id(keyed: bool, n: u64) -> String {
    if keyed { event_id(n) } else { order_id(n) }
}

/// The message number of an id made by [`order_id`] or [`event_id`].
pub fn position_of(id: &str) -> Option<u64> {
    id.strip_prefix("order-")
        .or_else(|| id.strip_prefix("event-"))?
        .parse()
        .ok()
}

/// The lanes of a keyed run: an order's events are all in one lane, message number mod 16,
/// which is a fleet's partition (`fleet::PARTITIONS`).
pub const LANES: u64 = 16;

/// Lane positions per window of a keyed run: each window of a lane holds whole orders.
const WINDOW: u64 = 16;

/// What each event of an order is, by its place in the order: its kind and biz.
pub const EVENTS: [(&str, &str); 3] = [
    ("created", "ORDER"),
    ("paid", "PAYMENT"),
    ("shipped", "INVENTORY"),
];

/// Event `n` of a keyed run (`seed`): its order's number and its place in the order (0:
/// created, 1: paid, 2: shipped).
///
/// Message `n` sits at lane `(n - 1) mod 16`, lane position `k = (n - 1) div 16`. Each lane is
/// cut into windows of 16 positions; a window's orders, each of 1 to 3 events (drawn from the
/// seed, the last one cut to fit), take its positions in rounds: every order's `created`,
/// then the `paid` of those with two or more, then the `shipped` of those with three. So an
/// order's events come in order, a few dozen messages apart, with other orders' between them.
pub fn event_at(seed: u64, n: u64) -> (u64, u8) {
    let (lane, k) = ((n - 1) % LANES, (n - 1) / LANES);
    let (window, slot) = (k / WINDOW, k % WINDOW);
    let mut counts = [0u8; WINDOW as usize];
    let (mut orders, mut taken) = (0usize, 0u64);
    while taken < WINDOW {
        let draw = 1 + (mix(seed ^ mix(window ^ mix(lane ^ mix(orders as u64 + 7)))) % 3);
        let c = draw.min(WINDOW - taken);
        counts[orders] = c as u8;
        taken += c;
        orders += 1;
    }
    let mut rest = slot;
    let mut place = 0u8;
    let index = loop {
        let mut round = (0..orders).filter(|&i| counts[i] > place);
        let in_round = round.clone().count() as u64;
        if rest < in_round {
            break round.nth(rest as usize).unwrap_or_default();
        }
        rest -= in_round;
        place += 1;
    };
    let order = (window * WINDOW + index as u64) * LANES + lane + 1;
    (order, place)
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

/// Makes the orders of a run (or, keyed, its events).
#[derive(Clone, Debug)]
pub struct OrderGen {
    seed: u64,
    malformed: f64,
    invalid: f64,
    keyed: bool,
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
            keyed: false,
            biz: BIZ.map(|(name, _)| Arc::from(name)),
            buf: String::with_capacity(200),
        }
    }

    /// The same generator making a keyed run's events (see [`event_at`]).
    pub fn keyed(mut self, keyed: bool) -> OrderGen {
        self.keyed = keyed;
        self
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

    /// Message `n` of the run: order `n`, or (keyed) event `n`, keyed by its order's id.
    pub fn message(&mut self, n: u64) -> Message {
        if self.keyed {
            return self.event(n);
        }
        let id: Arc<str> = order_id(n).into();
        let payload = self.payload(n, n, None);
        let biz = self.biz[self.biz_index(n)].clone();
        Message::new(MessageId::from(id.clone()), biz, payload)
            .with_offset(n)
            .with_key(Key::from(id))
    }

    /// Event `n` of a keyed run.
    fn event(&mut self, n: u64) -> Message {
        let (order, place) = event_at(self.seed, n);
        let (_, biz) = EVENTS[usize::from(place)];
        let biz = self.biz[BIZ.iter().position(|(b, _)| *b == biz).unwrap_or(0)].clone();
        let payload = self.payload(n, order, Some(place));
        Message::new(event_id(n), biz, payload)
            .with_offset(n)
            .with_key(order_id(order))
    }

    /// The payload of message `n`, about order `order` (its customer, amount, items); an
    /// event says which it is and its place in the order.
    fn payload(&mut self, n: u64, order: u64, event: Option<u8>) -> Vec<u8> {
        let id = order_id(order);
        let h = mix(self.seed ^ mix(order));
        let customer = h % 10_000;
        let amount_cents = 100 + (h >> 16) % 50_000;
        let items = 1 + (h >> 40) % 9;
        let currency = CURRENCIES[((h >> 50) % 3) as usize];
        self.buf.clear();
        if let Some(place) = event {
            let kind = EVENTS[usize::from(place)].0;
            let event = event_id(n);
            let _ = write!(
                self.buf,
                r#"{{"event":"{event}","kind":"{kind}","seq":{place},"#
            );
        } else {
            self.buf.push('{');
        }
        let _ = match self.shape(n) {
            Shape::Good => write!(
                self.buf,
                r#""order":"{id}","customer":"c-{customer}","amount_cents":{amount_cents},"currency":"{currency}","items":{items}}}"#
            ),
            // Cut off in the middle of a key, as a truncated write would leave it.
            Shape::Malformed => write!(
                self.buf,
                r#""order":"{id}","customer":"c-{customer}","amou"#
            ),
            Shape::Invalid => write!(
                self.buf,
                r#""order":"{id}","customer":"c-{customer}","amount_cents":{amount_cents},"currency":"{currency}","items":0}}"#
            ),
        };
        self.buf.clone().into_bytes()
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
    fn a_keyed_runs_orders_have_their_events_in_order_in_one_lane() {
        use std::collections::BTreeMap;
        assert_eq!(LANES, u64::from(crate::pipeline::fleet::PARTITIONS));
        let n = 20_000;
        let mut orders: BTreeMap<u64, Vec<(u64, u8)>> = BTreeMap::new();
        for k in 1..=n {
            let (order, place) = event_at(7, k);
            orders.entry(order).or_default().push((k, place));
        }
        let mut sizes = [0usize; 4];
        for (order, events) in &orders {
            let places: Vec<u8> = events.iter().map(|e| e.1).collect();
            assert_eq!(
                places,
                (0..places.len() as u8).collect::<Vec<_>>(),
                "{order}"
            );
            let lane = (order - 1) % LANES;
            assert!(
                events.iter().all(|(k, _)| (k - 1) % LANES == lane),
                "{order}"
            );
            sizes[places.len()] += 1;
        }
        // One to three events each, all three sizes common.
        assert_eq!(sizes[0], 0);
        assert!(
            sizes[1..].iter().all(|&s| s > orders.len() / 6),
            "{sizes:?}"
        );
        let mut g = OrderGen::new(7, 0.0, 0.0).keyed(true);
        let m = g.message(5);
        let (order, place) = event_at(7, 5);
        assert_eq!(m.id.as_str(), "event-000005");
        assert_eq!(m.key.as_ref().map(|k| k.to_string()), Some(order_id(order)));
        assert_eq!(&*m.biz, EVENTS[usize::from(place)].1);
        assert_eq!(position_of(m.id.as_str()), Some(5));
        let text = String::from_utf8(m.payload.to_vec()).unwrap();
        assert!(
            text.starts_with(r#"{"event":"event-000005","kind":"#),
            "{text}"
        );
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
