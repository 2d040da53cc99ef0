//! What a run leaves in Redis is bounded: the acked fates a partition's position covers are
//! pruned in the script that moves it, so once every partition's position is at its end the
//! only fates left are the dead letters' (`scale-out.md`, "Cost per message"; SQLite keeps
//! the same).

use super::*;
use crate::one_at_a_time;

#[test]
fn a_finished_run_leaves_only_its_dead_letters_fates_in_redis() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let ns = "pm";
    let dir = tempfile::tempdir().unwrap();
    let out = Running::spawn(node_cmd(&server, ns, "x1", dir.path(), 3000, 1000.0, "10s")).wait();
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report:#}");
    assert_eq!(report["emitted"], 3000, "{report:#}");
    let dead_lettered = report["dead_lettered"].as_u64().expect("dead_lettered");

    let mut c = server.client();
    let fates = scan(&mut c, &format!("{{{ns}}}:f:*"));
    let acked: Vec<&String> = fates
        .iter()
        .filter(|k| redis_cmd::<Option<String>>(&mut c, &["GET", k]).as_deref() == Some("acked"))
        .collect();
    assert!(
        acked.is_empty(),
        "{} acked fates left behind positions at their end: {:?}",
        acked.len(),
        &acked[..acked.len().min(10)]
    );
    assert_eq!(
        fates.len() as u64,
        dead_lettered,
        "one kept fate per dead letter"
    );
    let sets = scan(&mut c, &format!("{{{ns}}}:acked:*"));
    let entries: u64 = sets
        .iter()
        .map(|k| redis_cmd::<u64>(&mut c, &["ZCARD", k]))
        .sum();
    assert_eq!(entries, 0, "acked:<source> entries left in {sets:?}");
    // The fleet's fates still say one per order.
    let store = open(&server, ns);
    let unknown: Vec<String> = fleet_fates(&store, 3000)
        .into_iter()
        .filter(|(_, f)| f.is_none())
        .map(|(id, _)| id)
        .collect();
    assert!(unknown.is_empty(), "orders without a fate: {unknown:?}");
}
