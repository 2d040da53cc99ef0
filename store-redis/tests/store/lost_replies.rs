//! Replies lost on the way back (the connection cut after the server ran the script, through
//! [`Proxy`]): the caller sees an unreachable store, and what the script did is still safe.
//! A lost claim's retries come back after their lease; a lost batch applied again ends as if
//! applied once.

use std::time::{Duration, Instant};

use rebound_runtime::store::*;

use super::proxy::Proxy;
use super::{connect, fresh_namespace, server};
use rebound_runtime::store::conformance::records::*;

/// Runs `f` until it succeeds (the connection comes back by itself); bounded.
fn until_ok<T>(what: &str, mut f: impl FnMut() -> Result<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_unreachable(), "{what}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{what} still failing after 10 s: {e}"),
        }
    }
}

#[test]
fn a_claim_whose_reply_is_lost_comes_back_after_its_lease_and_is_claimed_again() {
    let ns = fresh_namespace("lost-claim");
    let direct = connect(&server().url(), &ns);
    let proxy = Proxy::start(server().port());
    let cut = connect(&proxy.url(), &ns);
    let all: Vec<_> = (0..10).map(|i| format!("m{i}")).collect();
    apply_done(
        &direct,
        all.iter()
            .map(|id| schedule(retry(id, 100)))
            .collect::<Vec<_>>(),
    );

    proxy.lose_next_reply();
    let err = cut
        .claim("node-1", 10, Duration::from_millis(300))
        .unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    assert!(err.to_string().contains("claim"), "{err}");
    assert_eq!(proxy.cuts(), 1);
    // The server ran it: the retries are in flight under tokens nobody holds, not lost.
    assert_eq!(direct.depth().unwrap(), (0, 10));
    assert!(direct.scheduled().unwrap().is_empty());

    // After the lease, a reap returns them, and the node claims them again (a reclaim each).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut returned = Vec::new();
    while returned.len() < all.len() {
        assert!(Instant::now() < deadline, "reaped only {returned:?}");
        std::thread::sleep(Duration::from_millis(50));
        returned.extend(
            direct
                .reap("node-2", 100, 5, Duration::from_secs(30))
                .unwrap()
                .returned,
        );
    }
    let again = until_ok("claim", || cut.claim("node-1", 10, Duration::from_secs(30)));
    let mut claimed: Vec<String> = again
        .retries
        .iter()
        .map(|r| r.message.id.to_string())
        .collect();
    claimed.sort();
    assert_eq!(claimed, all);
    assert_eq!(again.reclaims, 10);
}

#[test]
fn a_batch_whose_reply_is_lost_applied_again_ends_as_if_applied_once() {
    let ns = fresh_namespace("lost-apply");
    let direct = connect(&server().url(), &ns);
    let proxy = Proxy::start(server().port());
    let cut = connect(&proxy.url(), &ns);
    apply_done(&direct, [dead(letter("x", "ORDER", "L1", "BAD_JSON", 5))]);
    let batch = vec![
        schedule(retry("a", 100)),
        acked_at("b", 101, "orders", 2),
        dead(letter("c", "ORDER", "L3", "DB_LOCK_WAIT", 104)),
        position("orders", 5, 105),
        WriteOp::Replay(action("x", "alice", "fixed", 106)),
    ];

    proxy.lose_next_reply();
    let err = cut.apply(&batch).unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    let answers = until_ok("apply", || cut.apply(&batch));
    assert_eq!(
        answers,
        [
            Applied::Done,
            Applied::Done, // b's fate was pruned behind the position: written again
            Applied::FateAlreadyKnown(Fate::DeadLettered),
            Applied::Done,
            Applied::AlreadyHandled(DeadLetterStatus::Replayed),
        ]
    );
    assert_eq!(
        scheduled_ids(&direct),
        [(mid("a"), ms(100)), (mid("x"), ms(106))]
    );
    assert_eq!(all_dead_letters(&direct).len(), 2, "one letter for c");
    assert_eq!(all_audit(&direct).len(), 1, "one replay");
    assert_eq!(fate(&direct, "b"), None);
    assert_eq!(direct.position("orders").unwrap(), Some(5));
}
