//! Three nodes run one run of 50,000 orders on one Redis; one of them is killed by PID
//! (SIGKILL) at random moments. In one variant it is restarted each time (after its lease, so
//! that its name is free again), in the other it never comes back. At the end, read from
//! Redis: nothing lost, no retry left due or in flight, no stray row, one fate per order, and
//! every second firing of a retry (the same id and attempt claimed twice) began with a claim of
//! a killed node. Every node prints the same report.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::*;
use crate::one_at_a_time;

const MESSAGES: u64 = 50_000;
const LEASE: &str = "2s";
const LEASE_WAIT: Duration = Duration::from_millis(2600);

/// One node process, its stderr in a file (its claim log is too long for a pipe).
struct Node {
    name: &'static str,
    instance: usize,
    log: PathBuf,
    child: Running,
}

fn start(server: &TestServer, ns: &str, dir: &Path, name: &'static str, instance: usize) -> Node {
    let data = dir.join(name);
    let log = dir.join(format!("{name}-{instance}.log"));
    let mut cmd = node_cmd(server, ns, name, &data, MESSAGES, 1000.0, LEASE);
    cmd.stdout(Stdio::piped())
        .stderr(File::create(&log).expect("a log file"));
    let child = Running::of(cmd.spawn().expect("spawn rebound"));
    Node {
        name,
        instance,
        log,
        child,
    }
}

fn written(store: &RedisStore) -> u64 {
    orders_written(store)
}

fn fleet_killed(restart: bool, seed: u64, ns: &str) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = open(&server, ns);
    let mut nodes: Vec<Node> = ["n1", "n2", "n3"]
        .iter()
        .map(|name| start(&server, ns, dir.path(), name, 0))
        .collect();
    let victim = rng.random_range(0..nodes.len());
    let mut killed_logs: Vec<PathBuf> = Vec::new();
    let rounds = if restart { 3 } else { 1 };
    let mut points: Vec<u64> = (0..rounds)
        .map(|_| rng.random_range(MESSAGES / 20..MESSAGES * 3 / 4))
        .collect();
    points.sort_unstable();
    for (round, point) in points.iter().enumerate() {
        let node = &mut nodes[victim];
        let reached = wait_until(Duration::from_secs(300), || {
            node.child.exited() || written(&store) >= *point
        });
        assert!(reached, "round {round}: no progress towards {point} orders");
        std::thread::sleep(Duration::from_millis(rng.random_range(0..200)));
        let at = written(&store);
        let old = std::mem::replace(
            node,
            // A placeholder until the restart (or for ever): its exit is never waited on.
            Node {
                name: node.name,
                instance: node.instance + 1,
                log: node.log.clone(),
                child: Running::none(),
            },
        );
        let out = old.child.kill9();
        eprintln!(
            "round {round}: killed {} (instance {}) at {at} orders written, status {:?}",
            old.name, old.instance, out.status
        );
        killed_logs.push(old.log.clone());
        if restart {
            std::thread::sleep(LEASE_WAIT);
            *node = start(&server, ns, dir.path(), old.name, old.instance + 1);
        }
    }
    // Every live node works until every order has its fate, then reports and exits 0.
    let mut reports = Vec::new();
    let mut logs = Vec::new();
    let run = Run {
        server: &server,
        ns,
        messages: MESSAGES,
    };
    for node in nodes {
        logs.push(node.log.clone());
        if !node.child.is_some() {
            continue;
        }
        let out = node
            .child
            .wait_or_explain(FINISH_AT_MOST, Some(&node.log), || run.stuck());
        let log = std::fs::read_to_string(&node.log).unwrap_or_default();
        let tail: String = log.lines().rev().take(30).collect::<Vec<_>>().join("\n");
        assert_eq!(out.status.code(), Some(0), "{} failed:\n{tail}", node.name);
        reports.push((node.name, report(&out)));
    }
    assert!(!reports.is_empty());
    for (name, r) in &reports {
        assert_eq!(r["node"]["name"], *name, "{r:#}");
        assert!(r["node"]["processed"].as_u64().is_some(), "{r:#}");
        assert!(r["node"]["retries_fired"].as_u64().is_some(), "{r:#}");
    }
    let (first_name, first) = &reports[0];
    assert_eq!(first["lost"], 0, "{first:#}");
    assert_eq!(first["complete"], true, "{first:#}");
    assert_eq!(first["emitted"], MESSAGES, "{first:#}");
    let settled = first["acked"].as_u64().unwrap() + first["dead_lettered"].as_u64().unwrap();
    assert_eq!(settled, MESSAGES, "{first:#}");
    for (name, r) in &reports[1..] {
        assert_eq!(
            shared_fields(r),
            shared_fields(first),
            "{name} and {first_name} print different reports"
        );
    }

    // What Redis holds: nothing due, nothing in flight, no row; one fate per order.
    let (due, inflight, rows) = leftovers(&server, ns);
    assert_eq!((due, inflight), (0, 0), "retries left over");
    assert!(
        rows.is_empty(),
        "stray retry rows: {:?}",
        &rows[..rows.len().min(10)]
    );
    let fates = fleet_fates(&store, MESSAGES);
    let missing: Vec<&String> = fates
        .iter()
        .filter(|(_, f)| f.is_none())
        .map(|(id, _)| id)
        .collect();
    assert!(
        missing.is_empty(),
        "orders without a fate: {:?}",
        &missing[..missing.len().min(10)]
    );

    // Every second firing of a retry began with a claim whose lease ran out: a killed node's,
    // or one a reaper returned (a live node that stalled past its lease on a loaded machine;
    // its late writes are refused as stale).
    let mut by_retry: BTreeMap<(String, u64), Vec<(u64, bool)>> = BTreeMap::new();
    let mut reaped = std::collections::BTreeSet::new();
    for log in logs.iter().chain(&killed_logs) {
        let killed = killed_logs.contains(log);
        let text = std::fs::read_to_string(log).unwrap_or_default();
        reaped.extend(super::reaps(&text));
        for (id, attempt, token) in claims(&text) {
            by_retry
                .entry((id, attempt))
                .or_default()
                .push((token, killed));
        }
    }
    let mut twice = 0;
    for (retry, mut claims) in by_retry {
        if claims.len() < 2 {
            continue;
        }
        twice += 1;
        claims.sort_unstable();
        claims.dedup();
        let (_, earlier) = claims.split_at(claims.len() - 1);
        let _ = earlier;
        for &(token, killed) in &claims[..claims.len() - 1] {
            assert!(
                killed || reaped.contains(&retry.0),
                "{retry:?} was claimed again after claim {token}, which no killed node held and no reaper returned: {claims:?}"
            );
        }
    }
    eprintln!("{twice} retries fired twice, each after a kill");
}

#[test]
fn a_node_killed_three_times_and_restarted_loses_nothing() {
    let _one = one_at_a_time();
    fleet_killed(true, 0x6b11_0003, "kill9-restart");
}

#[test]
fn a_node_killed_for_good_loses_nothing_its_partitions_and_claims_move() {
    let _one = one_at_a_time();
    fleet_killed(false, 0x6b11_0001, "kill9-gone");
}
