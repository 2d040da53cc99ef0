//! Nodes: a name held by one live process, heartbeats, liveness by the server's clock.

use std::time::Duration;

use rebound_store_redis::TestServer;
use rebound_store_redis::fleet::{Join, Member, NodeStatus};

use crate::store;

const LEASE: Duration = Duration::from_millis(300);

#[test]
fn a_second_live_process_with_a_name_is_refused_and_a_dead_one_taken_over() {
    let server = TestServer::start();
    let s = store(&server, "nodes-takeover");
    let first = Member::new("eu-1");
    let second = Member::new("eu-1");

    let Join::Joined {
        started_at,
        took_over: false,
    } = s.join(&first, LEASE).unwrap()
    else {
        panic!("the first process takes a free name");
    };
    match s.join(&second, LEASE).unwrap() {
        Join::Taken {
            started_at: held_since,
            last_seen,
        } => {
            assert_eq!(held_since, started_at);
            assert!(last_seen >= started_at);
        }
        other => panic!("a second live process must be refused, got {other:?}"),
    }
    // Joining again (a lost reply) keeps the first process's start.
    assert_eq!(
        s.join(&first, LEASE).unwrap(),
        Join::Joined {
            started_at,
            took_over: false
        }
    );
    assert!(s.heartbeat(&first, &NodeStatus::default()).unwrap());

    // The first process goes silent past its lease: the name is free to take over.
    std::thread::sleep(LEASE + Duration::from_millis(150));
    let Join::Joined {
        took_over: true, ..
    } = s.join(&second, LEASE).unwrap()
    else {
        panic!("a dead process's name is taken over");
    };
    // The first process wakes: its heartbeat and its leave are refused, the name stays taken.
    assert!(!s.heartbeat(&first, &NodeStatus::default()).unwrap());
    assert!(!s.leave(&first).unwrap());
    assert!(s.heartbeat(&second, &NodeStatus::default()).unwrap());
    let live = s.nodes(LEASE).unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].node, "eu-1");
    assert!(matches!(s.join(&first, LEASE).unwrap(), Join::Taken { .. }));
}

#[test]
fn nodes_lists_who_heartbeat_within_the_lease_with_their_reports() {
    let server = TestServer::start();
    let s = store(&server, "nodes-live");
    let a = Member::new("b-node");
    let b = Member::new("a-node");
    s.join(&a, LEASE).unwrap();
    s.join(&b, LEASE).unwrap();
    let status = NodeStatus {
        rules_version: Some("00ff00ff00ff00ff".into()),
        canary_version: Some("0011223344556677".into()),
        rules_errors: Some(vec!["rules/x.yaml: unknown field `wen`".into()]),
        partitions: vec![1, 5, 9],
        in_flight: 12,
        retries_claimed: 3,
        breakers: vec![rebound_store_redis::fleet::NodeBreaker {
            breaker: "gw".into(),
            key: "eu".into(),
            state: "open".into(),
        }],
    };
    assert!(s.heartbeat(&a, &status).unwrap());

    let live = s.nodes(LEASE).unwrap();
    let names: Vec<&str> = live.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(names, ["a-node", "b-node"], "sorted by name");
    assert_eq!(live[1].status, status);
    assert_eq!(live[0].status, NodeStatus::default(), "no heartbeat yet");
    assert!(live[1].last_seen >= live[1].started_at);
    let first_seen = live[1].last_seen;

    // b stays silent; a keeps heartbeating, and stops reporting its errors.
    let fixed = NodeStatus {
        rules_errors: None,
        canary_version: None,
        ..status.clone()
    };
    for _ in 0..6 {
        std::thread::sleep(LEASE / 3);
        assert!(s.heartbeat(&a, &fixed).unwrap());
    }
    let live = s.nodes(LEASE).unwrap();
    assert_eq!(live.len(), 1, "b was not seen within the lease: {live:?}");
    assert_eq!(live[0].node, "b-node");
    assert_eq!(live[0].status, fixed, "a cleared field is gone");
    assert!(live[0].last_seen > first_seen);
    // A longer lease still counts b.
    assert_eq!(s.nodes(Duration::from_secs(60)).unwrap().len(), 2);

    assert!(s.leave(&a).unwrap());
    assert!(!s.leave(&a).unwrap(), "leaving twice finds nothing");
    assert!(
        s.nodes(Duration::from_secs(60))
            .unwrap()
            .iter()
            .all(|n| n.node != "b-node")
    );
    assert!(
        !s.heartbeat(&a, &fixed).unwrap(),
        "a node that left must join again"
    );
}
