//! Gates of several nodes sharing one fleet's state ([`MemoryFleet`], the plain model of a
//! shared store): a budget admits against the fleet's totals, a breaker opened on one node is
//! adopted by the others (and by a node that joins later), and a fleet that does not answer
//! leaves each node on its own state until it rejoins. Syncs are made by hand, one round trip
//! each, as the sync thread makes them.

use std::time::Duration;

use rebound_engine::{CompiledSet, FailureContext, SourceFile, compile};
use rebound_runtime::adaptive::{
    BreakerState, FleetState, MemoryFleet, MemoryFleetNode, RetryGate, Scope,
};
use rebound_runtime::time::{TimeScale, Timestamp};
use rebound_runtime::topology::{FailureRecord, FuseConfig, Message};
use tokio::time::Instant;

const REAL: TimeScale = TimeScale::REAL;

fn set(yaml: &str) -> CompiledSet {
    compile(vec![SourceFile::new("a.yaml", "rules/a.yaml", yaml)]).unwrap()
}

fn retry(id: &str, biz: &str, code: &str) -> Message {
    let mut m = Message::new(id, biz, "{}");
    m.retry.attempt = 1;
    m.retry.failures.push(FailureRecord {
        attempt: 1,
        at: Timestamp::ZERO,
        code: code.into(),
        message: String::new(),
        attrs: Default::default(),
        rule: rebound_engine::RuleRef::Defaults,
        version: rebound_engine::Version::from_hash(1),
        delay: Some(Duration::from_millis(10)),
    });
    m
}

/// A node: its gate (fuse off) and its handle on the fleet.
struct Node {
    gate: RetryGate,
    fleet: MemoryFleetNode,
}

impl Node {
    fn new(fleet: &MemoryFleet, name: &str) -> Node {
        let off = FuseConfig {
            enabled: false,
            ..FuseConfig::default()
        };
        Node {
            gate: RetryGate::new(&off, Instant::now()),
            fleet: fleet.node(name),
        }
    }

    /// One sync, as the sync thread makes it: true if the fleet answered.
    fn sync(&self, set: &CompiledSet) -> bool {
        let push = self.gate.take_push(Some((set, REAL)));
        match self.fleet.sync(&push) {
            Ok(totals) => {
                self.gate
                    .apply(Some((set, REAL)), &push, &totals, Instant::now());
                true
            }
            Err(_) => {
                self.gate.lost();
                false
            }
        }
    }

    /// Asks `n` retries of PAYMENT to fire: how many did.
    fn fire(&self, set: &CompiledSet, n: usize, tag: &str) -> usize {
        (0..n)
            .filter(|i| {
                self.gate.admit(
                    set,
                    REAL,
                    &retry(&format!("{tag}{i}"), "PAYMENT", "NET"),
                    Instant::now(),
                )
            })
            .count()
    }
}

const FLOOR_ONLY: &str = "version: 1\nbudgets:\n  - { id: pay, match: { biz: PAYMENT }, ratio: 0%, min_per_s: 1, window: 1h }\n";

#[test]
fn three_nodes_fire_one_budget_not_three() {
    let s = set(FLOOR_ONLY); // the floor: 3600 retries an hour, for the fleet
    let fleet = MemoryFleet::new();
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::new(&fleet, &format!("n{i}")))
        .collect();
    for n in &nodes {
        assert!(n.sync(&s));
    }
    for n in &nodes {
        assert!(n.sync(&s)); // every node now knows there are three
        assert_eq!(n.gate.scope(), Scope::Fleet);
        assert_eq!(n.gate.fleet_nodes(), 3);
    }
    // Each wants 5,000: between two syncs each may fire a third of what is left.
    let mut fired = 0;
    for round in 0..40 {
        for (i, n) in nodes.iter().enumerate() {
            fired += n.fire(&s, 5000, &format!("r{round}n{i}-"));
            assert!(n.sync(&s));
        }
    }
    assert!(fired <= 3600 + 2 * 1200, "within the spec's bound: {fired}");
    assert!(fired >= 3600, "the whole allowance is used: {fired}");
    assert_eq!(
        fleet.total("r:pay"),
        fired as u64,
        "every retry counted once"
    );
}

#[test]
fn a_breaker_opened_on_one_node_is_open_on_the_others_and_on_a_late_joiner() {
    let s = set(
        "version: 1\nbreakers:\n  - { id: gw, match: { biz: PAYMENT }, open_at: 50%, min_samples: 5, window: 10s, cool_down: 1h }\n",
    );
    let fleet = MemoryFleet::new();
    let (a, b) = (Node::new(&fleet, "a"), Node::new(&fleet, "b"));
    assert!(a.sync(&s) && b.sync(&s));
    let attrs = Default::default();
    let mut ctx = FailureContext::new("PAYMENT", "NET", 1);
    ctx.attrs = &attrs;
    for _ in 0..5 {
        a.gate
            .finished(&s, REAL, "PAYMENT", Some(&ctx), None, Instant::now());
    }
    assert!(a.gate.breaker_open(&s, &ctx, Instant::now()));
    assert!(
        !b.gate.breaker_open(&s, &ctx, Instant::now()),
        "not before a sync"
    );
    assert!(a.sync(&s) && b.sync(&s));
    assert!(b.gate.breaker_open(&s, &ctx, Instant::now()));
    assert_eq!(
        b.fire(&s, 10, "b"),
        0,
        "held on the node that saw no failure"
    );
    let late = Node::new(&fleet, "late");
    assert!(late.sync(&s));
    assert!(late.gate.breaker_open(&s, &ctx, Instant::now()));
    assert_eq!(late.fire(&s, 10, "l"), 0);
}

#[test]
fn samples_spread_over_the_nodes_open_the_breaker_on_the_fleets_counts() {
    let s = set(
        "version: 1\nbreakers:\n  - { id: gw, match: { biz: PAYMENT }, open_at: 50%, min_samples: 6, window: 1h, cool_down: 1h }\n",
    );
    let fleet = MemoryFleet::new();
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::new(&fleet, &format!("n{i}")))
        .collect();
    let attrs = Default::default();
    let mut ctx = FailureContext::new("PAYMENT", "NET", 1);
    ctx.attrs = &attrs;
    for n in &nodes {
        assert!(n.sync(&s));
        // Two failures each: below min_samples on every node, six in the fleet.
        for _ in 0..2 {
            n.gate
                .finished(&s, REAL, "PAYMENT", Some(&ctx), None, Instant::now());
        }
        assert!(!n.gate.breaker_open(&s, &ctx, Instant::now()));
    }
    for _ in 0..2 {
        for n in &nodes {
            assert!(n.sync(&s));
        }
    }
    for n in &nodes {
        assert!(n.gate.breaker_open(&s, &ctx, Instant::now()));
    }
}

#[test]
fn a_fleet_that_does_not_answer_leaves_each_node_its_share_and_the_counts_rejoin() {
    let s = set(
        "version: 1\nbudgets:\n  - { id: pay, match: { biz: PAYMENT }, ratio: 0%, min_per_s: 1, window: 30s }\n",
    );
    let fleet = MemoryFleet::new();
    let (a, b) = (Node::new(&fleet, "a"), Node::new(&fleet, "b"));
    for _ in 0..2 {
        assert!(a.sync(&s) && b.sync(&s));
    }
    fleet.set_down(true);
    assert!(!a.sync(&s));
    assert_eq!(a.gate.scope(), Scope::Node);
    // On its own: the floor of 30 divided by the two nodes it last knew.
    assert_eq!(a.fire(&s, 100, "down"), 15);
    fleet.set_down(false);
    assert!(a.sync(&s));
    assert_eq!(a.gate.scope(), Scope::Fleet);
    assert!(a.sync(&s));
    assert_eq!(
        fleet.total("r:pay"),
        15,
        "what it fired alone is the fleet's now"
    );
    // Fifteen left for the fleet: b's share is half of it, rounded up.
    assert!(b.sync(&s));
    assert_eq!(b.fire(&s, 100, "b"), 8);
}

#[test]
fn failures_spread_over_the_nodes_during_the_ramp_open_it_again_on_the_fleets_counts() {
    // A cool-down as long as the window: by the ramp, what opened it has left the window.
    let s = set(
        "version: 1\nbreakers:\n  - { id: gw, match: { biz: PAYMENT }, open_at: 50%, min_samples: 6, window: 1s, cool_down: 1s, ramp: 1h }\n",
    );
    let fleet = MemoryFleet::new();
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::new(&fleet, &format!("n{i}")))
        .collect();
    let attrs = Default::default();
    let mut ctx = FailureContext::new("PAYMENT", "NET", 1);
    ctx.attrs = &attrs;
    let state = |n: &Node| {
        n.gate.snapshot(Instant::now()).breakers[&("gw".to_owned(), String::new())].state
    };
    let fail_twice_each = || {
        for n in &nodes {
            for _ in 0..2 {
                n.gate
                    .finished(&s, REAL, "PAYMENT", Some(&ctx), None, Instant::now());
            }
        }
        for _ in 0..2 {
            for n in &nodes {
                assert!(n.sync(&s));
            }
        }
    };
    for n in &nodes {
        assert!(n.sync(&s));
    }
    fail_twice_each();
    assert!(nodes.iter().all(|n| state(n) == BreakerState::Open));
    // Wait (on the condition, generously) until every node is half-open.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| state(n) == BreakerState::HalfOpen) {
        assert!(std::time::Instant::now() < deadline, "never half-open");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Two failures on each node during the ramp: below min_samples on any node, six in the
    // fleet's window: open again on every node.
    fail_twice_each();
    for n in &nodes {
        assert_eq!(state(n), BreakerState::Open);
    }
}

#[test]
fn during_the_ramp_the_fleet_releases_one_nodes_share_not_one_per_node() {
    // A ramp of an hour: its share stays at 10% for the length of the test.
    let s = set(
        "version: 1\nbreakers:\n  - { id: gw, match: { biz: PAYMENT }, open_at: 50%, min_samples: 3, window: 1s, cool_down: 1s, ramp: 1h }\n",
    );
    let fleet = MemoryFleet::new();
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::new(&fleet, &format!("n{i}")))
        .collect();
    let attrs = Default::default();
    let mut ctx = FailureContext::new("PAYMENT", "NET", 1);
    ctx.attrs = &attrs;
    let state = |n: &Node| {
        n.gate.snapshot(Instant::now()).breakers[&("gw".to_owned(), String::new())].state
    };
    for n in &nodes {
        assert!(n.sync(&s));
    }
    for _ in 0..3 {
        nodes[0]
            .gate
            .finished(&s, REAL, "PAYMENT", Some(&ctx), None, Instant::now());
    }
    for _ in 0..2 {
        for n in &nodes {
            assert!(n.sync(&s));
        }
    }
    assert!(nodes.iter().all(|n| state(n) == BreakerState::Open));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| state(n) == BreakerState::HalfOpen) {
        assert!(std::time::Instant::now() < deadline, "never half-open");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Each node holds 100 retries and asks about them again after every round of syncs: one
    // node alone would release 10 (10% of its 100); the fleet releases as many, and more only
    // by what the others released since a node's last totals (each at most its part,
    // ⌈10 / 3⌉): never 10 per node.
    let mut released = 0;
    let mut rounds = Vec::new();
    for _ in 0..4 {
        for (i, n) in nodes.iter().enumerate() {
            released += n.fire(&s, 100, &format!("n{i}-"));
        }
        for n in &nodes {
            assert!(n.sync(&s));
        }
        rounds.push(released);
    }
    assert!(rounds.iter().all(|r| (10..=18).contains(r)), "{rounds:?}");
    assert_eq!(
        rounds[2], rounds[3],
        "once every node has read the others' releases, none more: {rounds:?}"
    );
}
