//! The fleet's canary: one at a time, its arms summed over the nodes, ended by the first
//! node that judges it.

use rebound_store_redis::TestServer;
use rebound_store_redis::fleet::CanaryStart;

use crate::store;

fn counts(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(f, n)| ((*f).to_owned(), *n)).collect()
}

#[test]
fn one_canary_at_a_time_its_arms_summed_and_the_first_end_wins() {
    let server = TestServer::start();
    let (a, b) = (store(&server, "can"), store(&server, "can"));
    assert_eq!(a.canary().unwrap(), None);
    let CanaryStart::Started { epoch, since_ms } = a.start_canary("{\"v\":1}").unwrap() else {
        panic!("the first start starts");
    };
    assert!(
        since_ms > 1_600_000_000_000,
        "the server's clock: {since_ms}"
    );
    assert_eq!(
        b.start_canary("{\"v\":2}").unwrap(),
        CanaryStart::Active { epoch },
        "a second canary waits for the first to end"
    );
    let seen = b.canary().unwrap().unwrap();
    assert_eq!(
        (seen.epoch, seen.state.as_str(), seen.spec.as_str()),
        (epoch, "running", "{\"v\":1}")
    );
    assert!(seen.is_active());

    a.sync_canary(epoch, &counts(&[("s:first", 10), ("c:first", 4)]))
        .unwrap()
        .unwrap();
    let sums = b
        .sync_canary(
            epoch,
            &counts(&[("s:first", 5), ("c:dead", 4), ("c:first", 0)]),
        )
        .unwrap()
        .unwrap();
    assert_eq!(sums["s:first"], 15);
    assert_eq!(sums["c:first"], 4);
    assert_eq!(sums["c:dead"], 4);
    assert_eq!(
        a.sync_canary(epoch + 1, &[]).unwrap(),
        None,
        "another epoch's"
    );

    // Held is a change of state, not an end; then both nodes judge a rollback: one wins.
    assert!(a.end_canary(epoch, "held", "too few", "").unwrap());
    assert!(
        b.end_canary(epoch, "rolled_back", "dead letters", "{}")
            .unwrap()
    );
    assert!(
        !a.end_canary(epoch, "rolled_back", "dead letters", "{}")
            .unwrap()
    );
    let ended = a.canary().unwrap().unwrap();
    assert_eq!(
        (ended.state.as_str(), ended.reason.as_str()),
        ("rolled_back", "dead letters")
    );
    assert!(!ended.is_active());

    // The next canary starts under a new epoch, its counters from zero.
    let CanaryStart::Started { epoch: next, .. } = b.start_canary("{\"v\":3}").unwrap() else {
        panic!("a canary starts once the last ended");
    };
    assert_eq!(next, epoch + 1);
    let fresh = a
        .sync_canary(next, &counts(&[("s:first", 1)]))
        .unwrap()
        .unwrap();
    assert_eq!(fresh["s:first"], 1);
    assert!(!fresh.contains_key("c:dead"));
    assert_eq!(a.sync_canary(epoch, &[]).unwrap(), None);
}
