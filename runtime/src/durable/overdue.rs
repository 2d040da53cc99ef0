//! After a restart, the retries that came due while the process was down are not all fired at
//! once: [`spread`] gives them new due times over `min(their count / 1000, 60)` seconds, in
//! due order (`operations.md`, "Adaptive retries at run time"). A dependency that was down
//! with the process then sees them come back at about a thousand a second, not in one burst.
//!
//! Only the due times in memory move; the store's rows keep the ones the rules gave. A second
//! crash during the spread finds those rows overdue again and spreads them again, so nothing
//! is gained by rewriting them, and a restart would otherwise begin with one write per overdue
//! retry: the very burst this avoids, aimed at the store.

use std::time::Duration;

use crate::time::Timestamp;
use crate::topology::Message;

/// Overdue retries per second of the spread.
const PER_SECOND: u64 = 1000;
/// The longest spread, however many are overdue.
const MAX_SPREAD: Duration = Duration::from_secs(60);

/// How long `n` overdue retries are spread over: `n / 1000` seconds, at most 60.
pub(super) fn spread_of(n: usize) -> Duration {
    let ms = (n as u64).saturating_mul(1000) / PER_SECOND;
    Duration::from_millis(ms).min(MAX_SPREAD)
}

/// Sorts `retries` (recovered, as `(due, message)`) by due time, and gives those due at or
/// before `now` new due times from `now` on, evenly over [`spread_of`] their count, oldest due
/// first (the first is due at `now`). The others keep their due times. Returns how many were
/// overdue. Equal due times keep the order they came in.
pub(super) fn spread(retries: &mut [(Timestamp, Message)], now: Timestamp) -> usize {
    retries.sort_by_key(|(due, _)| *due);
    let n = retries.partition_point(|(due, _)| *due <= now);
    let span = spread_of(n).as_millis() as u64;
    for (i, (due, _)) in retries[..n].iter_mut().enumerate() {
        // i < n, so every new due time falls inside the spread; u128 keeps span × i exact.
        let offset = (u128::from(span) * i as u128 / n as u128) as u64;
        *due = now.saturating_add(Duration::from_millis(offset));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retries(dues: &[u64]) -> Vec<(Timestamp, Message)> {
        dues.iter()
            .enumerate()
            .map(|(i, &due)| {
                let m = Message::new(format!("m{i}"), "ORDER", "{}");
                (Timestamp::from_millis(due), m)
            })
            .collect()
    }

    fn ids(r: &[(Timestamp, Message)]) -> Vec<(u64, &str)> {
        r.iter()
            .map(|(due, m)| (due.as_millis(), m.id.as_str()))
            .collect()
    }

    #[test]
    fn the_spread_is_a_millisecond_per_retry_up_to_a_minute() {
        assert_eq!(spread_of(0), Duration::ZERO);
        assert_eq!(spread_of(1), Duration::from_millis(1));
        assert_eq!(spread_of(10_000), Duration::from_secs(10));
        assert_eq!(spread_of(60_000), Duration::from_secs(60));
        assert_eq!(spread_of(5_000_000), Duration::from_secs(60));
    }

    #[test]
    fn overdue_retries_are_spread_oldest_first_and_the_rest_keep_their_due_times() {
        // m0 and m2 are overdue at 1 000 (m2 the older), m1 is not, m3 is due exactly now.
        let mut r = retries(&[900, 5_000, 100, 1_000]);
        assert_eq!(spread(&mut r, Timestamp::from_millis(1_000)), 3);
        // Three overdue: spread over 3 ms, one a millisecond from now on.
        assert_eq!(
            ids(&r),
            [(1_000, "m2"), (1_001, "m0"), (1_002, "m3"), (5_000, "m1")]
        );
    }

    #[test]
    fn equal_due_times_keep_their_order_and_many_share_a_millisecond_past_a_minute() {
        let mut r = retries(&vec![7; 120_000]);
        assert_eq!(spread(&mut r, Timestamp::from_millis(10)), 120_000);
        let last = r.last().unwrap().0.as_millis();
        assert_eq!(last, 10 + 59_999, "within the 60 s cap");
        assert!(r.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(r[0].1.id.as_str(), "m0");
        assert_eq!(r[1].1.id.as_str(), "m1");
        assert_eq!(r[2].0.as_millis(), 11, "two a millisecond");
    }

    #[test]
    fn nothing_overdue_changes_nothing() {
        let mut r = retries(&[50, 20]);
        assert_eq!(spread(&mut r, Timestamp::from_millis(10)), 0);
        assert_eq!(ids(&r), [(20, "m1"), (50, "m0")]);
    }
}
