//! A budget's room on a fleet, as arithmetic alone (`operations.md`, "One fleet, one budget").
//!
//! At a sync a node reads the fleet's first deliveries and retries fired in the window; what
//! is left is the allowance less those retries, and until the next totals arrive the node fires
//! at most `⌈⌊left⌋ / N⌉` retries (its share; N the live nodes). What it counted since the
//! totals' push (first deliveries and retries, in flight or not yet sent) is added to what it
//! read, so its own share is never spent twice. The fleet's overshoot is bounded by the shares
//! the other nodes fired unseen: at most `(N − 1) × ⌈allowance / N⌉`.
//!
//! When the store is down the node falls back to its own window with the floor divided by the
//! last known N ([`node_allowance`]): the ratio part needs no division, its own first
//! deliveries being its part of the fleet's.

use super::budget::BudgetLimits;

/// One budget as a node sees it on a fleet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetBudget {
    /// The fleet's first deliveries in the window, at the last totals.
    pub firsts_seen: u64,
    /// The fleet's retries fired in the window, at the last totals.
    pub fired_seen: u64,
    /// This node's first deliveries not in those totals.
    pub firsts_mine: u64,
    /// This node's retries fired not in those totals.
    pub fired_mine: u64,
}

impl FleetBudget {
    /// What was left of the allowance at the last totals (its whole retries).
    pub fn left(&self, limits: &BudgetLimits) -> u64 {
        let allowance = limits.allowance(to_usize(self.firsts_seen + self.firsts_mine));
        // The slack of `fits`: 20% of 100 is 20, not 19.999….
        let whole = (allowance + 1e-9).floor().max(0.0) as u64;
        whole.saturating_sub(self.fired_seen)
    }

    /// This node's share of what is left between two syncs: `⌈left / nodes⌉`.
    pub fn share(&self, limits: &BudgetLimits, nodes: usize) -> u64 {
        self.left(limits).div_ceil(nodes.max(1) as u64)
    }

    /// True if one more retry fits this node's share.
    pub fn has_room(&self, limits: &BudgetLimits, nodes: usize) -> bool {
        self.fired_mine < self.share(limits, nodes)
    }
}

/// The allowance of a node on its own while the store is down: the floor divided by the last
/// known number of live nodes, the ratio of its own first deliveries.
pub fn node_allowance(limits: &BudgetLimits, own_firsts: usize, nodes: usize) -> f64 {
    (limits.floor / nodes.max(1) as f64).max(limits.ratio * own_firsts as f64)
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn limits(ratio: f64, floor_per_s: f64) -> BudgetLimits {
        // A window longer than any run below: the model is about shares, not windows.
        BudgetLimits::new(
            ratio,
            floor_per_s,
            Duration::from_secs(10),
            Duration::from_secs(10),
        )
    }

    #[test]
    fn the_share_is_the_left_over_divided_by_the_nodes_rounded_up() {
        let l = limits(0.5, 1.0); // floor 10
        let b = FleetBudget {
            firsts_seen: 100,
            fired_seen: 20,
            ..FleetBudget::default()
        };
        assert_eq!(b.left(&l), 30, "50% of 100, less 20");
        assert_eq!(b.share(&l, 3), 10);
        assert_eq!(b.share(&l, 4), 8, "7.5 rounded up");
        let spent = FleetBudget { fired_mine: 8, ..b };
        assert!(!spent.has_room(&l, 4));
        // Less than one whole retry left is none.
        let l = limits(0.0, 0.05); // floor 0.5
        assert_eq!(FleetBudget::default().share(&l, 1), 0);
    }

    #[test]
    fn alone_the_fleet_budget_is_the_budget() {
        let l = limits(0.2, 1.0);
        let mut b = FleetBudget {
            firsts_seen: 100,
            ..FleetBudget::default()
        };
        let mut fired = 0;
        while b.has_room(&l, 1) {
            b.fired_mine += 1;
            fired += 1;
        }
        assert_eq!(fired, 20);
    }

    #[test]
    fn the_fallback_divides_the_floor_not_the_ratio() {
        let l = limits(0.2, 3.0); // floor 30
        assert_eq!(node_allowance(&l, 0, 3), 10.0);
        assert_eq!(node_allowance(&l, 100, 3), 20.0);
        assert_eq!(node_allowance(&l, 0, 0), 30.0, "no node known: alone");
    }

    /// One step of a generated fleet: a node sees a first delivery, wants to fire a retry,
    /// pushes what it counted, or reads the totals.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        First(usize),
        Retry(usize),
        Push(usize),
        Read(usize),
    }

    fn steps(nodes: usize) -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            prop_oneof![
                1 => (0..nodes).prop_map(Step::First),
                3 => (0..nodes).prop_map(Step::Retry),
                1 => (0..nodes).prop_map(Step::Push),
                1 => (0..nodes).prop_map(Step::Read),
            ],
            1..600,
        )
    }

    /// One simulated node: its view, and what it counted but has not pushed.
    #[derive(Debug, Default, Clone, Copy)]
    struct Node {
        view: FleetBudget,
        unpushed_firsts: u64,
        unpushed_fired: u64,
    }

    proptest! {
        /// Against a naive fleet (one server holding the sums; nodes pushing and reading at
        /// arbitrary moments, apart): the retries the fleet fired never exceed the allowance of
        /// the fleet's first deliveries by more than the spec's bound, `(N − 1) × ⌈A / N⌉`;
        /// alone, never at all; and once every node has pushed and read, a node that wants
        /// to fire gets the allowance's rest (no share is lost).
        #[test]
        fn the_fleet_never_overshoots_the_allowance_by_more_than_the_bound(
            n in 1usize..5, ratio in 0.0f64..1.0, floor in 0.0f64..2.0, seed in steps(5),
        ) {
            let l = limits(ratio, floor);
            let mut nodes = vec![Node::default(); n];
            let (mut server_firsts, mut server_fired) = (0u64, 0u64);
            let (mut firsts, mut fired) = (0u64, 0u64);
            for step in seed {
                match step {
                    Step::First(i) => {
                        let node = &mut nodes[i % n];
                        node.view.firsts_mine += 1;
                        node.unpushed_firsts += 1;
                        firsts += 1;
                    }
                    Step::Retry(i) => {
                        let node = &mut nodes[i % n];
                        if node.view.has_room(&l, n) {
                            node.view.fired_mine += 1;
                            node.unpushed_fired += 1;
                            fired += 1;
                        }
                    }
                    Step::Push(i) => {
                        let node = &mut nodes[i % n];
                        server_firsts += node.unpushed_firsts;
                        server_fired += node.unpushed_fired;
                        node.unpushed_firsts = 0;
                        node.unpushed_fired = 0;
                    }
                    Step::Read(i) => {
                        // A read comes with a push (one round trip): what was counted is in
                        // the totals read.
                        let node = &mut nodes[i % n];
                        server_firsts += node.unpushed_firsts;
                        server_fired += node.unpushed_fired;
                        node.unpushed_firsts = 0;
                        node.unpushed_fired = 0;
                        node.view = FleetBudget { firsts_seen: server_firsts, fired_seen: server_fired, ..FleetBudget::default() };
                    }
                }
                let allowance = l.allowance(firsts as usize);
                let whole = (allowance + 1e-9).floor() as u64;
                let bound = (n as u64 - 1) * whole.div_ceil(n as u64);
                prop_assert!(fired <= whole + bound, "fired {} allowance {} bound {}", fired, whole, bound);
                if n == 1 {
                    prop_assert!(fired <= whole);
                }
            }
            // Everyone syncs (push and read) once more; then a node that keeps asking and
            // syncing fires up to the allowance.
            for node in nodes.iter_mut() {
                server_firsts += node.unpushed_firsts;
                server_fired += node.unpushed_fired;
                node.unpushed_firsts = 0;
                node.unpushed_fired = 0;
            }
            let whole = (l.allowance(firsts as usize) + 1e-9).floor() as u64;
            for _ in 0..200 {
                let view = FleetBudget { firsts_seen: server_firsts, fired_seen: server_fired, ..FleetBudget::default() };
                let mut node = view;
                while node.has_room(&l, n) {
                    node.fired_mine += 1;
                }
                server_fired += node.fired_mine;
            }
            prop_assert_eq!(server_fired, whole.max(fired), "the rest of the allowance is reachable, and no more");
        }
    }
}
