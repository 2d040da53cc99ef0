//! One retry budget's state (`operations.md`, "Budgets"): over a sliding window, the retries
//! fired for failures in its scope may not exceed `max(min_per_s × window, ratio × first
//! deliveries of its biz in the window)`. The owner counts the first deliveries it sees and
//! asks for room before it fires a retry; a retry without room waits (never dropped).

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// What a budget allows, from the rule set's `budgets:` entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetLimits {
    /// The share of first deliveries, 0 to 1.
    pub ratio: f64,
    /// The floor: retries always allowed per window (`min_per_s × window`, both in the
    /// rules' time, so the same under any time scale).
    pub floor: f64,
    /// The sliding window, in real time.
    pub window: Duration,
}

impl BudgetLimits {
    /// The limits of `ratio` and `min_per_s` over a window of `window` rules' time that runs
    /// as `real`.
    pub fn new(ratio: f64, min_per_s: f64, window: Duration, real: Duration) -> BudgetLimits {
        BudgetLimits {
            ratio,
            floor: min_per_s * window.as_secs_f64(),
            window: real,
        }
    }

    /// The most retries the window may hold with `firsts` first deliveries in it.
    pub fn allowance(&self, firsts: usize) -> f64 {
        self.floor.max(self.ratio * firsts as f64)
    }
}

/// One budget's sliding window: the times of the first deliveries and of the retries fired
/// in it. The retries kept never exceed the allowance, and the first deliveries are as many
/// as the window saw (bounded by the source's rate).
#[derive(Debug)]
pub struct Budget {
    limits: BudgetLimits,
    firsts: VecDeque<Instant>,
    fired: VecDeque<Instant>,
}

impl Budget {
    /// An empty window under `limits`.
    pub fn new(limits: BudgetLimits) -> Budget {
        Budget {
            limits,
            firsts: VecDeque::new(),
            fired: VecDeque::new(),
        }
    }

    /// The limits now in force (a reload may change them; the counts stay).
    pub fn set_limits(&mut self, limits: BudgetLimits) {
        self.limits = limits;
    }

    /// The limits.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// A first delivery of the budget's biz at `now`.
    pub fn first_delivery(&mut self, now: Instant) {
        self.prune(now);
        self.firsts.push_back(now);
    }

    /// True if a retry could fire at `now` without the window's retries exceeding the
    /// allowance (nothing is counted).
    pub fn has_room(&mut self, now: Instant) -> bool {
        self.prune(now);
        fits(
            self.fired.len() + 1,
            self.limits.allowance(self.firsts.len()),
        )
    }

    /// Fires one retry at `now` if there is room: true if it was counted.
    pub fn try_fire(&mut self, now: Instant) -> bool {
        if !self.has_room(now) {
            return false;
        }
        self.fired.push_back(now);
        true
    }

    /// True if a retry could fire at `now` under `allowance` instead of the limits' own (a
    /// node on its own while the fleet's store is down: `share::node_allowance`).
    pub fn has_room_under(&mut self, now: Instant, allowance: impl Fn(usize) -> f64) -> bool {
        self.prune(now);
        fits(self.fired.len() + 1, allowance(self.firsts.len()))
    }

    /// Counts one retry fired at `now` whose room was judged elsewhere (by the fleet's
    /// totals): the window stays this node's truth for a fallback.
    pub fn count_fired(&mut self, now: Instant) {
        self.prune(now);
        self.fired.push_back(now);
    }

    /// Retries fired in the window ending at `now`.
    pub fn fired(&mut self, now: Instant) -> usize {
        self.prune(now);
        self.fired.len()
    }

    /// Drops what left the window `(now − window, now]`.
    fn prune(&mut self, now: Instant) {
        let Some(start) = now.checked_sub(self.limits.window) else {
            return;
        };
        while self.firsts.front().is_some_and(|t| *t <= start) {
            self.firsts.pop_front();
        }
        while self.fired.front().is_some_and(|t| *t <= start) {
            self.fired.pop_front();
        }
    }
}

/// `n` retries within an allowance (a little slack for the float arithmetic of `ratio ×
/// count`: 20% of 100 is 20).
fn fits(n: usize, allowance: f64) -> bool {
    n as f64 <= allowance + 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits() -> BudgetLimits {
        BudgetLimits::new(0.2, 1.0, Duration::from_secs(10), Duration::from_secs(10))
    }

    #[test]
    fn the_floor_allows_min_per_s_times_the_window_without_traffic() {
        let t0 = Instant::now();
        let mut b = Budget::new(limits());
        let fired = (0..20).filter(|_| b.try_fire(t0)).count();
        assert_eq!(fired, 10);
        // Once the first ones leave the window, there is room again.
        assert!(!b.has_room(t0 + Duration::from_secs(9)));
        assert!(b.try_fire(t0 + Duration::from_secs(10)));
    }

    #[test]
    fn the_ratio_of_first_deliveries_raises_the_allowance() {
        let t0 = Instant::now();
        let mut b = Budget::new(limits());
        for i in 0..100 {
            b.first_delivery(t0 + Duration::from_millis(i));
        }
        let at = t0 + Duration::from_millis(100);
        let fired = (0..50).filter(|_| b.try_fire(at)).count();
        assert_eq!(fired, 20, "20% of 100");
    }

    /// One event of a generated sequence: time passes, then a first delivery or a retry that
    /// asks for room.
    #[derive(Debug, Clone)]
    enum Event {
        First(u64),
        Retry(u64),
    }

    fn events() -> impl Strategy<Value = Vec<Event>> {
        prop::collection::vec(
            prop_oneof![
                (0u64..400).prop_map(Event::First),
                (0u64..400).prop_map(Event::Retry),
            ],
            1..400,
        )
    }

    proptest! {
        /// Against a sliding window counted by hand: the same answer to every retry, the
        /// retries fired in any window never above the allowance of that window, and every
        /// refused retry (held) fires once the window has room.
        #[test]
        fn the_budget_agrees_with_a_window_counted_by_hand(events in events(), ratio in 0.0f64..1.0, min in 0.0f64..3.0) {
            let limits = BudgetLimits::new(ratio, min, Duration::from_secs(2), Duration::from_secs(2));
            let t0 = Instant::now();
            let mut budget = Budget::new(limits);
            let (mut firsts, mut fired): (Vec<Instant>, Vec<Instant>) = (Vec::new(), Vec::new());
            let mut now = t0;
            let mut held = 0usize;
            for e in &events {
                let (gap, first) = match e { Event::First(g) => (*g, true), Event::Retry(g) => (*g, false) };
                now += Duration::from_millis(gap);
                let start = now.checked_sub(limits.window);
                let inside = |t: &&Instant| start.is_none_or(|s| **t > s);
                if first {
                    budget.first_delivery(now);
                    firsts.push(now);
                    continue;
                }
                let in_window = fired.iter().filter(inside).count();
                let allowed = limits.allowance(firsts.iter().filter(inside).count());
                let room = fits(in_window + 1, allowed);
                prop_assert_eq!(budget.try_fire(now), room);
                if room { fired.push(now) } else { held += 1 }
                // A lower allowance than before (first deliveries left the window) fires
                // nothing more, never takes back what fired.
                prop_assert!(fits(fired.iter().filter(inside).count(), allowed) || !room);
            }
            // Held retries are not dropped: asked again once the window has emptied, they fire
            // (up to the floor at least, one window at a time).
            let mut later = now;
            let mut released = 0usize;
            while released < held {
                later += limits.window;
                let before = released;
                while released < held && budget.try_fire(later) { released += 1 }
                // A floor under one retry a window and no traffic never frees room.
                prop_assume!(released > before);
            }
            prop_assert_eq!(released, held);
        }
    }
}
