//! Ordered keys across a fleet: two nodes run one `--ordered` run of 20,000 events on one
//! Redis, and one of them is killed (SIGKILL) mid-run for good. An order's events all come
//! from one partition, so one node holds them; a retry of an ordered event stays on that node
//! (in memory), and a killed node's events come again from its partitions' positions to the
//! node that takes them over. At the end nothing is lost and no event reached the shared order
//! sink before an earlier event of its order.

use std::fs::File;
use std::process::Stdio;
use std::time::Duration;

use super::*;
use crate::one_at_a_time;

const EVENTS: u64 = 20_000;

#[test]
fn a_node_killed_mid_run_leaves_every_order_in_order() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ns = "ordered";
    let store = open(&server, ns);
    let start = |name: &str| {
        let mut cmd = node_cmd(
            &server,
            ns,
            name,
            &dir.path().join(name),
            EVENTS,
            1000.0,
            "2s",
        );
        cmd.arg("--ordered")
            .stdout(Stdio::piped())
            .stderr(File::create(dir.path().join(format!("{name}.log"))).unwrap());
        Running::of(cmd.spawn().expect("spawn rebound"))
    };
    let mut victim = start("n1");
    let survivor = start("n2");
    let written = || orders_written(&store);
    assert!(
        wait_until(Duration::from_secs(120), || victim.exited()
            || written() >= EVENTS / 3),
        "no progress"
    );
    assert!(victim.kill9().status.code().is_none(), "n1 finished first");

    let out = survivor.wait();
    let log = std::fs::read_to_string(dir.path().join("n2.log")).unwrap_or_default();
    let tail: String = log.lines().rev().take(30).collect::<Vec<_>>().join("\n");
    assert_eq!(out.status.code(), Some(0), "n2 failed:\n{tail}");
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert_eq!(report["out_of_order"], 0, "{report:#}");
    assert_eq!(report["complete"], true, "{report:#}");
    assert_eq!(report["emitted"], EVENTS, "{report:#}");
    assert_eq!(report["keyed"], true, "{report:#}");
}
