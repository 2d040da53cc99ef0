//! The fleet through a payment-gateway outage (`rebound run --outage`, `operations.md`, "One
//! fleet, one budget"): the same run on one node alone and on three nodes of one namespace,
//! each on the test's own redis-server. Three nodes send into the dead gateway at most
//! [`MAX_RATIO`] × the retries one node sends (each node's report counts its own: `node.outage_retries`), and
//! every node's breaker opens within 1 s of the first (each node logs its opening, by the
//! machine's one clock; not the test's speed).

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use super::*;
use crate::one_at_a_time;

const MESSAGES: u64 = 10_000;
/// At ×10 the shipped breaker's cool-down (30 s) and ramp (1 m) last 3 s and 6 s: an outage
/// of 200 s (20 s real) goes through two or three openings and ramps.
const SCALE: f64 = 10.0;
const OUTAGE: &str = "200s";
/// The bound on the fleet's retries into the outage, against one node's. The target
/// is 1.2×; measured (debug build, two shared cores) 1.0× to 1.21×, so the test asserts 1.5×,
/// a margin for a loaded machine that still fails a fleet whose nodes each ramp on their own
/// (1.9× to 2.0×, `benches/outage_fleet.sh`).
const MAX_RATIO: f64 = 1.5;

/// What one node did: its report and when its breaker of the gateway first opened.
struct Ran {
    report: serde_json::Value,
    opened: Option<SystemTime>,
}

/// Runs `nodes` at once in namespace `ns`, each through the outage, and waits for them all.
fn run(server: &TestServer, ns: &str, dir: &Path, nodes: &[&str]) -> Vec<Ran> {
    let running: Vec<(Running, std::path::PathBuf)> = nodes
        .iter()
        .map(|node| {
            let log = dir.join(format!("{ns}-{node}.log"));
            let mut cmd = node_cmd(server, ns, node, &dir.join(node), MESSAGES, SCALE, "5s");
            cmd.args(["--outage", OUTAGE])
                .env("RUST_LOG", "warn,rebound_runtime::adaptive=info")
                .stdout(Stdio::piped())
                .stderr(File::create(&log).expect("a log file"));
            (Running::of(cmd.spawn().expect("spawn rebound")), log)
        })
        .collect();
    let run = Run {
        server,
        ns,
        messages: MESSAGES,
    };
    finish_logged(&run, running)
        .into_iter()
        .map(|(report, text)| {
            assert_eq!(report["lost"], 0, "{report:#}");
            assert_eq!(report["complete"], true, "{report:#}");
            Ran {
                report,
                opened: first_opening(&text, "payment-gateway"),
            }
        })
        .collect()
}

/// The time of the first line of `log` that says breaker `breaker` opened (by whatever: its
/// own samples, the fleet's, or the fleet's record).
fn first_opening(log: &str, breaker: &str) -> Option<SystemTime> {
    let needle = format!("breaker={breaker} ");
    log.lines()
        .filter(|l| l.contains("breaker opened") && l.contains(&needle))
        .find_map(|l| humantime::parse_rfc3339(l.split_whitespace().next()?).ok())
}

/// The `PAYMENT` retries a node sent into the outage.
fn outage_retries(ran: &Ran) -> u64 {
    ran.report["node"]["outage_retries"]
        .as_u64()
        .unwrap_or_else(|| panic!("no node.outage_retries in {:#}", ran.report))
}

#[test]
fn three_nodes_send_the_outage_what_one_node_sends_and_open_together() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let alone = run(&server, "outage-one", dir.path(), &["solo"]);
    let fleet = run(&server, "outage-three", dir.path(), &["a", "b", "c"]);

    let one = outage_retries(&alone[0]);
    let three: u64 = fleet.iter().map(outage_retries).sum();
    let opened: Vec<SystemTime> = fleet
        .iter()
        .map(|r| r.opened.expect("every node's breaker opened"))
        .collect();
    let first = *opened.iter().min().unwrap();
    let after: Vec<Duration> = opened
        .iter()
        .map(|t| t.duration_since(first).unwrap_or_default())
        .collect();
    eprintln!(
        "retries into the outage: one node {one}, three nodes {three} ({:.2}x); \
         breakers opened after the first: {after:?}",
        three as f64 / one.max(1) as f64
    );
    assert!(one > 0, "one node alone sent nothing into the outage");
    assert!(
        three as f64 <= MAX_RATIO * one as f64,
        "three nodes sent {three} retries into the outage, one node {one}"
    );
    for (node, d) in ["a", "b", "c"].iter().zip(&after) {
        assert!(
            *d <= Duration::from_secs(1),
            "node {node}'s breaker opened {d:?} after the first"
        );
    }
    // The fleet's report shows the fleet's breaker: the same states on every node.
    let states =
        |r: &Ran| r.report["breakers"]["payment-gateway"]["payment-gateway"]["states"].clone();
    assert!(
        states(&fleet[0]).as_array().is_some_and(|s| !s.is_empty()),
        "{:#}",
        fleet[0].report["breakers"]
    );
    for r in &fleet {
        assert_eq!(states(r), states(&fleet[0]));
    }
}
