//! Source partitions: owned by one live node each, balanced, taken over with a new epoch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rebound_store_redis::fleet::{Held, Member, NodeStatus};
use rebound_store_redis::{RedisStore, TestServer};

use crate::store;

const LEASE: Duration = Duration::from_millis(500);
const P: u32 = 16;
const SOURCE: &str = "orders";

/// A node as the runtime would drive it: heartbeat, balance, and release its surplus at
/// once (it has nothing in flight).
struct Node {
    member: Member,
    held: Vec<Held>,
    lost: Vec<Held>,
}

impl Node {
    fn join(s: &RedisStore, name: &str) -> Node {
        let member = Member::new(name);
        s.join(&member, LEASE).unwrap();
        Node {
            member,
            held: Vec::new(),
            lost: Vec::new(),
        }
    }

    fn step(&mut self, s: &RedisStore) {
        let status = NodeStatus {
            partitions: self.held.iter().map(|h| h.partition).collect(),
            ..NodeStatus::default()
        };
        assert!(s.heartbeat(&self.member, &status).unwrap());
        let owned = s
            .balance_partitions(SOURCE, P, &self.member, LEASE, &self.held)
            .unwrap();
        assert!(owned.member);
        self.lost.extend(owned.lost.iter().copied());
        self.held = owned.held.clone();
        for p in &owned.surplus {
            let h = *owned.get(*p).expect("a surplus partition is held");
            assert!(s.release_partition(SOURCE, &self.member, &h).unwrap());
            self.held.retain(|x| x.partition != *p);
        }
    }
}

/// Steps `nodes` every lease/4 until every partition has one live owner among them, agreed
/// by the store and by the nodes, with shares that differ by at most one. How long it took.
fn settle(s: &RedisStore, nodes: &mut [Node], within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        for n in nodes.iter_mut() {
            n.step(s);
        }
        if balanced(s, nodes) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "not settled within {within:?}: {:?}",
            s.partition_owners(SOURCE, P).unwrap()
        );
        std::thread::sleep(LEASE / 4);
    }
}

fn balanced(s: &RedisStore, nodes: &[Node]) -> bool {
    let owners = s.partition_owners(SOURCE, P).unwrap();
    let mut counts: BTreeMap<&str, u32> =
        nodes.iter().map(|n| (n.member.node.as_str(), 0)).collect();
    for o in &owners {
        let Some(lease) = &o.owner else { return false };
        let Some(c) = counts.get_mut(lease.node.as_str()) else {
            return false;
        };
        *c += 1;
        // The store's owner is the one node that believes it holds the partition, at its epoch.
        let believers: Vec<&Node> = nodes
            .iter()
            .filter(|n| n.held.iter().any(|h| h.partition == o.partition))
            .collect();
        if believers.len() != 1
            || believers[0].member.node != lease.node
            || believers[0].member.instance != lease.instance
            || believers[0].held.iter().all(|h| h.epoch != o.epoch)
        {
            return false;
        }
    }
    let max = counts.values().max().copied().unwrap_or(0);
    let min = counts.values().min().copied().unwrap_or(0);
    max - min <= 1
}

fn epochs(s: &RedisStore) -> Vec<u64> {
    s.partition_owners(SOURCE, P)
        .unwrap()
        .iter()
        .map(|o| o.epoch)
        .collect()
}

#[test]
fn every_partition_ends_owned_by_one_live_node_as_nodes_join_and_leave() {
    let server = TestServer::start();
    let s = store(&server, "partitions-balance");
    let within = 6 * LEASE;

    let mut nodes = vec![Node::join(&s, "a")];
    let took = settle(&s, &mut nodes, within);
    assert_eq!(nodes[0].held.len(), 16);
    assert_eq!(epochs(&s), vec![1; 16], "first takings are epoch 1");
    eprintln!("1 node settled in {took:?}");

    nodes.push(Node::join(&s, "b"));
    let took = settle(&s, &mut nodes, within);
    assert_eq!((nodes[0].held.len(), nodes[1].held.len()), (8, 8));
    eprintln!("2 nodes settled in {took:?}");

    nodes.push(Node::join(&s, "c"));
    let took = settle(&s, &mut nodes, within);
    let mut shares: Vec<usize> = nodes.iter().map(|n| n.held.len()).collect();
    shares.sort();
    assert_eq!(shares, [5, 5, 6]);
    eprintln!("3 nodes settled in {took:?}");

    // c stops heartbeating and balancing (killed): its partitions go to a and b once its
    // leases end, each with a new epoch.
    let c = nodes.pop().unwrap();
    let before = s.partition_owners(SOURCE, P).unwrap();
    let left = Instant::now();
    let took = settle(&s, &mut nodes, within);
    assert_eq!((nodes[0].held.len(), nodes[1].held.len()), (8, 8));
    eprintln!("after c left, settled in {took:?}");
    assert!(
        left.elapsed() < 2 * LEASE + Duration::from_millis(600),
        "c's partitions were taken over in {:?}",
        left.elapsed()
    );
    let after = s.partition_owners(SOURCE, P).unwrap();
    for held in &c.held {
        let (b, a) = (
            &before[held.partition as usize],
            &after[held.partition as usize],
        );
        assert_eq!(b.epoch, held.epoch);
        assert!(
            a.epoch > b.epoch,
            "a takeover moves the epoch: {b:?} then {a:?}"
        );
    }
    // No live node ever lost a partition to another: it gave up only its surplus.
    for n in nodes.iter().chain([&c]) {
        assert!(n.lost.is_empty(), "{} lost {:?}", n.member.node, n.lost);
    }
}

#[test]
fn a_stalled_node_finds_its_partitions_taken_and_its_old_epochs_refused() {
    let server = TestServer::start();
    let s = store(&server, "partitions-stall");
    let mut a = Node::join(&s, "a");
    a.step(&s);
    assert_eq!(a.held.len(), 16);
    let mut b = Node::join(&s, "b");

    // a stalls (SIGSTOP): b keeps going and, once a's leases end, takes everything.
    let stalled = a.held.clone();
    assert!(crate::eventually(4 * LEASE, || {
        b.step(&s);
        b.held.len() == 16
    }));
    for (old, new) in stalled.iter().zip(&b.held) {
        assert_eq!(old.partition, new.partition);
        assert_eq!(new.epoch, old.epoch + 1, "a takeover increments the epoch");
    }

    // a wakes. Not having heartbeat within the lease, it holds nothing.
    let owned = s
        .balance_partitions(SOURCE, P, &a.member, LEASE, &stalled)
        .unwrap();
    assert!(!owned.member);
    assert!(owned.held.is_empty());
    assert_eq!(
        owned.lost, stalled,
        "every partition it thought it had is lost"
    );
    // Its releases at the old epochs are refused, and change nothing.
    for h in &stalled {
        assert!(!s.release_partition(SOURCE, &a.member, h).unwrap());
    }
    assert!(
        s.partition_owners(SOURCE, P)
            .unwrap()
            .iter()
            .all(|o| o.owner.as_ref().is_some_and(|l| l.node == "b"))
    );

    // Once it heartbeats again it is a member with nothing free to take; b gives up its
    // surplus and a takes it, at yet another epoch.
    a.held = Vec::new();
    a.step(&s);
    assert!(
        a.held.is_empty(),
        "a live partition is never taken from its owner"
    );
    let took_back = std::time::Instant::now();
    let mut pair = [a, b];
    settle(&s, &mut pair, 6 * LEASE);
    assert!(took_back.elapsed() < 2 * LEASE);
    for h in &pair[0].held {
        assert_eq!(h.epoch, 3, "taken by a, by b, by a again");
    }
}
