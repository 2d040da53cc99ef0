//! The fleet on the shared store, through the public API of
//! [`RedisStore`](rebound_store_redis::RedisStore): nodes joining, heartbeating and
//! taken over; source partitions balanced by lease with fencing epochs; the rule set of
//! record, its history and its hints; the fleet-wide adaptive state (`adaptive`: one budget, one breaker state); and the runtime's
//! durable layer on it (`shared_store`: a retry one node schedules is claimed and fired by
//! another). Each test starts a `redis-server` of its own (never the machine's) and
//! uses short leases.

mod adaptive;
mod canary;
mod nodes;
mod partitions;
mod rules;
mod shared_store;

use std::time::{Duration, Instant};

use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

/// A store on `server`, namespace `ns`.
fn store(server: &TestServer, ns: &str) -> RedisStore {
    RedisStore::connect(&RedisOptions::new(server.url(), ns)).expect("connect to the test server")
}

/// Polls `f` every 20 ms until it is true or `within` has passed; true if it became true.
fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every key on the server: each must begin with one of the namespaces' hash tags.
fn all_keys(server: &TestServer) -> Vec<String> {
    let mut c = server.client();
    redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS")
}

#[test]
fn every_fleet_key_begins_with_its_namespace() {
    use rebound_runtime::time::Timestamp;
    use rebound_store_redis::fleet::{Member, NodeStatus, RuleRecord};

    let server = TestServer::start();
    for ns in ["ns-a", "ns-b"] {
        let s = store(&server, ns);
        let m = Member::new("n");
        let lease = Duration::from_secs(5);
        s.join(&m, lease).unwrap();
        s.heartbeat(&m, &NodeStatus::default()).unwrap();
        let owned = s.balance_partitions("orders", 4, &m, lease, &[]).unwrap();
        assert_eq!(owned.held.len(), 4);
        let rules = RuleRecord {
            version: rebound_engine::Version::from_hash(1),
            files: vec![("a.yaml".into(), "rules: []".into())],
            source: rebound_engine::reload::Source::File,
            at: Timestamp::from_millis(1),
        };
        s.seed_rules(&rules).unwrap();
        s.set_applied("n", rules.version, Some(&["e".to_owned()]))
            .unwrap();
        s.put_doc("sessions", "n#1", "{}").unwrap();
    }
    let keys = all_keys(&server);
    assert!(keys.len() >= 2 * 14, "{keys:?}");
    for k in &keys {
        assert!(
            k.starts_with("{ns-a}:") || k.starts_with("{ns-b}:"),
            "a key outside the namespaces: {k}"
        );
    }
    assert_eq!(
        keys.iter().filter(|k| k.starts_with("{ns-a}:")).count(),
        keys.len() / 2
    );
}
