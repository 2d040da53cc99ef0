//! A partition's position committed further by another node than its owner: a node that held
//! the partition before and had not heard yet that it lost it (its lease ran out while the
//! store was down, or while it was stopped) hands out and settles the same messages, and
//! commits past the new owner. The acked fates that position covers are pruned, and the new
//! owner's schedules of those messages are refused (their fate is known), so no fate ever tells
//! it that they settled: it must learn it from the position, or wait for ever.

use std::time::Duration;

use rebound::pipeline::orders::SOURCE;
use rebound_runtime::store::WriteOp;
use rebound_runtime::time::Timestamp;

use super::*;
use crate::one_at_a_time;

const MESSAGES: u64 = 4_000;

#[test]
fn a_partition_committed_further_by_its_last_owner_does_not_hold_the_run() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let ns = "stale-owner";
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let mut cmd = node_cmd(
        &server,
        ns,
        "a",
        &dir.path().join("a"),
        MESSAGES,
        1000.0,
        "2s",
    );
    cmd.env("RUST_LOG", "warn,rebound::pipeline::fleet::spout=info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("a log file"));
    let node = Running::of(cmd.spawn().expect("spawn rebound"));
    let store = open(&server, ns);
    assert!(
        wait_until(Duration::from_secs(300), || orders_written(&store) >= 200),
        "no progress"
    );
    // As the last owner would: partition 0 settled up to 240 of its 250 orders.
    let through = MESSAGES / PARTITIONS - 10;
    let source = partition_source(SOURCE, 0);
    store
        .apply(&[WriteOp::Position {
            source,
            position: through,
            at: Timestamp::now(),
        }])
        .expect("commit partition 0's position");
    let run = Run {
        server: &server,
        ns,
        messages: MESSAGES,
    };
    let report = &finish(&run, vec![(node, log.clone())])[0];
    assert_eq!(report["complete"], true, "{report:#}");
    assert_eq!(report["lost"], 0, "{report:#}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    // It went on because it learnt the position (not because nothing waited below it).
    assert!(
        text.contains("committed further by another node"),
        "{}",
        tail(&text, 40)
    );
}
