//! The fleet's adaptive state on Redis ([`RedisFleetState`]): three in-process nodes, each
//! with a connection and a process id of its own, share one budget; a breaker one opens is
//! open on the others within two of their syncs (a sync every 200 ms: well within the spec's
//! 1 s), and on a node that joins later; a push sent twice (a lost reply) counts once; the
//! server killed and restarted: the nodes fall back to their own state and rejoin, and what
//! they fired meanwhile is in the fleet's counts.

use std::sync::Arc;
use std::time::Duration;

use rebound_engine::{CompiledSet, FailureContext, PolicyHandle, SourceFile, compile};
use rebound_runtime::adaptive::{
    Counter, CounterOf, FleetState, FleetSync, Heat, Push, RetryGate, SYNC_EVERY, Scope, SyncParts,
};
use rebound_runtime::policy::RulePolicy;
use rebound_runtime::time::{TimeScale, Timestamp, TokioTime};
use rebound_runtime::topology::{FailureRecord, FuseConfig, Message};
use rebound_store_redis::TestServer;
use rebound_store_redis::fleet::{Member, RedisFleetState};
use tokio::time::Instant;

use crate::{eventually, store};

const REAL: TimeScale = TimeScale::REAL;
/// Generous: a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(30);

fn set(yaml: &str) -> CompiledSet {
    compile(vec![SourceFile::new("a.yaml", "rules/a.yaml", yaml)]).unwrap()
}

fn retry(id: &str) -> Message {
    let mut m = Message::new(id, "PAYMENT", "{}");
    m.retry.attempt = 1;
    m.retry.failures.push(FailureRecord {
        attempt: 1,
        at: Timestamp::ZERO,
        code: "NET".into(),
        message: String::new(),
        attrs: Default::default(),
        rule: rebound_engine::RuleRef::Defaults,
        version: rebound_engine::Version::from_hash(1),
        delay: Some(Duration::from_millis(10)),
    });
    m
}

fn gate() -> RetryGate {
    let off = FuseConfig {
        enabled: false,
        ..FuseConfig::default()
    };
    RetryGate::new(&off, Instant::now())
}

/// A node synced by hand: its gate and its side of the fleet.
struct Node {
    gate: RetryGate,
    fleet: RedisFleetState,
}

impl Node {
    fn new(server: &TestServer, ns: &str, name: &str) -> Node {
        Node {
            gate: gate(),
            fleet: RedisFleetState::new(&store(server, ns), &Member::new(name)),
        }
    }

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

    fn fire(&self, set: &CompiledSet, n: usize, tag: &str) -> usize {
        (0..n)
            .filter(|i| {
                self.gate
                    .admit(set, REAL, &retry(&format!("{tag}{i}")), Instant::now())
            })
            .count()
    }
}

const FLOOR_ONLY: &str = "version: 1\nbudgets:\n  - { id: pay, match: { biz: PAYMENT }, ratio: 0%, min_per_s: 1, window: 1h }\n";

#[test]
fn three_nodes_on_one_redis_fire_one_budget() {
    let server = TestServer::start();
    let s = set(FLOOR_ONLY); // 3,600 retries an hour, for the fleet
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::new(&server, "adaptive-budget", &format!("n{i}")))
        .collect();
    for _ in 0..2 {
        for n in &nodes {
            assert!(n.sync(&s));
        }
    }
    assert!(nodes.iter().all(|n| n.gate.fleet_nodes() == 3));
    let mut fired = 0;
    for round in 0..40 {
        for (i, n) in nodes.iter().enumerate() {
            fired += n.fire(&s, 5000, &format!("r{round}n{i}-"));
            assert!(n.sync(&s));
        }
    }
    assert!(fired >= 3600, "the allowance is used: {fired}");
    assert!(fired <= 3600 + 2 * 1200, "within the spec's bound: {fired}");
    // Alone, each node would have fired the whole floor: three times the fleet's.
    let alone = gate();
    let alone_fired = (0..5000)
        .filter(|i| alone.admit(&s, REAL, &retry(&format!("a{i}")), Instant::now()))
        .count();
    assert_eq!(alone_fired, 3600);
}

#[test]
fn a_push_sent_twice_is_counted_once() {
    let server = TestServer::start();
    let fleet = RedisFleetState::new(&store(&server, "adaptive-twice"), &Member::new("n"));
    let counter = Counter {
        of: CounterOf::Fired("pay".into()),
        window: Duration::from_secs(60),
    };
    let push = Push {
        seq: 1,
        adds: vec![(counter.clone(), 7)],
        reads: vec![counter.clone()],
        ..Push::default()
    };
    assert_eq!(fleet.sync(&push).unwrap().counts, [7]);
    assert_eq!(fleet.sync(&push).unwrap().counts, [7], "the same seq again");
    let next = Push {
        seq: 2,
        adds: vec![(counter.clone(), 1)],
        reads: vec![counter],
        ..Push::default()
    };
    let totals = fleet.sync(&next).unwrap();
    assert_eq!(totals.counts, [8]);
    assert_eq!(totals.nodes, 1);
}

const BREAKER: &str = "version: 1\nbreakers:\n  - { id: gw, match: { biz: PAYMENT }, open_at: 50%, min_samples: 5, window: 10s, cool_down: 1h }\n";

/// A node whose gate the sync thread keeps in step with the fleet.
struct Synced {
    gate: Arc<RetryGate>,
    sync: FleetSync,
}

fn synced(server: &TestServer, ns: &str, name: &str, policy: &RulePolicy) -> Synced {
    let gate = Arc::new(gate());
    let sync = FleetSync::start(SyncParts {
        fleet: Arc::new(RedisFleetState::new(&store(server, ns), &Member::new(name))),
        gate: gate.clone(),
        heat: Arc::new(Heat::new(Duration::from_secs(30))),
        policy: Arc::new(policy.clone()),
        time: Arc::new(TokioTime::new()),
        every: SYNC_EVERY,
    });
    Synced { gate, sync }
}

#[test]
fn a_breaker_opened_on_one_node_is_open_on_the_others_within_two_of_their_syncs() {
    let server = TestServer::start();
    let s = set(BREAKER);
    let policy = RulePolicy::new(Arc::new(PolicyHandle::new(set(BREAKER))), REAL);
    let ns = "adaptive-breaker";
    let nodes: Vec<Synced> = (0..3)
        .map(|i| synced(&server, ns, &format!("n{i}"), &policy))
        .collect();
    assert!(eventually(PATIENCE, || nodes.iter().all(|n| n
        .gate
        .scope()
        == Scope::Fleet
        && n.gate.fleet_nodes() == 3)));
    let attrs = Default::default();
    let mut ctx = FailureContext::new("PAYMENT", "NET", 1);
    ctx.attrs = &attrs;
    for _ in 0..5 {
        nodes[0]
            .gate
            .finished(&s, REAL, "PAYMENT", Some(&ctx), None, Instant::now());
    }
    assert!(nodes[0].gate.breaker_open(&s, &ctx, Instant::now()));
    // The opener's next sync opens the record; each other node's next one adopts it. Two
    // syncs of each after the opening are enough, whatever their order.
    let before: Vec<u64> = nodes.iter().map(|n| n.sync.syncs()).collect();
    assert!(eventually(PATIENCE, || nodes
        .iter()
        .zip(&before)
        .all(|(n, b)| n.sync.syncs() >= b + 2)));
    for n in &nodes {
        assert!(n.gate.breaker_open(&s, &ctx, Instant::now()));
    }
    // A node started after the opening sees it open at its first sync.
    let late = synced(&server, ns, "late", &policy);
    assert!(eventually(PATIENCE, || late.sync.syncs() >= 1));
    assert!(late.gate.breaker_open(&s, &ctx, Instant::now()));
}

#[test]
fn with_the_server_killed_the_nodes_fall_back_and_rejoin_with_what_they_fired() {
    let mut server = TestServer::start();
    let s = set(FLOOR_ONLY);
    let policy = RulePolicy::new(Arc::new(PolicyHandle::new(set(FLOOR_ONLY))), REAL);
    let ns = "adaptive-outage";
    let nodes: Vec<Synced> = (0..2)
        .map(|i| synced(&server, ns, &format!("n{i}"), &policy))
        .collect();
    assert!(eventually(PATIENCE, || nodes.iter().all(|n| n
        .gate
        .scope()
        == Scope::Fleet
        && n.gate.fleet_nodes() == 2)));
    server.kill();
    assert!(eventually(PATIENCE, || nodes
        .iter()
        .all(|n| n.gate.scope() == Scope::Node)));
    // On its own each fires the floor divided by the two nodes it last knew.
    let fired: usize = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (0..5000)
                .filter(|j| {
                    n.gate
                        .admit(&s, REAL, &retry(&format!("d{i}-{j}")), Instant::now())
                })
                .count()
        })
        .sum();
    assert_eq!(fired, 3600);
    server.restart();
    assert!(eventually(PATIENCE, || nodes
        .iter()
        .all(|n| n.gate.scope() == Scope::Fleet)));
    // What they fired alone is the fleet's (the restarted server kept its data): nothing
    // is left of the hour's allowance.
    let check = RedisFleetState::new(&store(&server, ns), &Member::new("check"));
    let fired_counter = Counter {
        of: CounterOf::Fired("pay".into()),
        window: Duration::from_secs(3600),
    };
    assert!(eventually(PATIENCE, || {
        check
            .sync(&Push {
                seq: 1,
                reads: vec![fired_counter.clone()],
                ..Push::default()
            })
            .is_ok_and(|t| t.counts == [3600])
    }));
    let refused = |(i, n): (usize, &Synced)| {
        !n.gate
            .admit(&s, REAL, &retry(&format!("after{i}")), Instant::now())
    };
    assert!(eventually(PATIENCE, || nodes
        .iter()
        .enumerate()
        .all(refused)));
}
