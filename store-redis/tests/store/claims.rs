//! The claims of the shared store ([`ClaimQueue`]): a claim moves entries from the due set to
//! the in-flight set in one step, extend renews only what is still held, reap returns what ran
//! out, a write under a stale token is refused, and a row reaped too often comes back as a
//! crash loop. A schedule that heads the due set publishes a wake hint.

use std::time::{Duration, Instant};

use rebound_runtime::store::*;
use rebound_store_redis::RedisStore;

use super::fresh_store;
use rebound_runtime::store::conformance::records::*;

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(200);

/// The retry as a claim hands it out: under `token`.
fn claimed_as(mut r: ScheduledRetry, token: ClaimToken) -> ScheduledRetry {
    r.claim = Some(token);
    r
}

fn token(r: &ScheduledRetry) -> ClaimToken {
    r.claim.expect("a claimed retry carries its token")
}

fn ids(retries: &[ScheduledRetry]) -> Vec<&str> {
    retries.iter().map(|r| r.message.id.as_str()).collect()
}

/// A schedule made under the claim of `claimed`.
fn schedule_under(claimed: &ScheduledRetry, due: u64) -> WriteOp {
    let mut next = retry(claimed.message.id.as_str(), due);
    next.claim = claimed.claim;
    schedule(next)
}

/// Reaps until `want` claims came back (their leases must run out first); bounded.
fn reap_until(s: &RedisStore, want: usize, max_reaps: u32) -> Reaped {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all = Reaped::default();
    while all.returned.len() + all.crash_loops.len() < want {
        assert!(
            Instant::now() < deadline,
            "nothing reaped within 10 s: {all:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        let r = s.reap("reaper", 100, max_reaps, LONG).unwrap();
        all.returned.extend(r.returned);
        all.crash_loops.extend(r.crash_loops);
    }
    all
}

#[test]
fn a_claim_moves_due_retries_in_flight_in_one_step() {
    let s = fresh_store("claim");
    let far = 4_000_000_000_000; // year 2096: not due
    apply_done(
        &s,
        [
            schedule(retry("a", 1_000)),
            schedule(retry("b", 3_000)),
            schedule(retry("c", 2_000)),
            schedule(retry("d", 4_000)),
            schedule(retry("later", far)),
        ],
    );
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();

    let first = s.claim("node-1", 3, LONG).unwrap();
    assert_eq!(ids(&first.retries), ["a", "c", "b"], "the earliest first");
    assert_eq!(first.reclaims, 0);
    assert_eq!(first.next_due, Some(ms(4_000)));
    let skew = first.now.as_millis().abs_diff(wall.as_millis() as u64);
    assert!(
        skew < 60_000,
        "the server's clock: {:?} vs {wall:?}",
        first.now
    );
    // Each comes back whole, under a token of its own.
    for r in &first.retries {
        let due = r.due.as_millis();
        assert_eq!(*r, claimed_as(retry(r.message.id.as_str(), due), token(r)));
    }
    let mut tokens: Vec<_> = first.retries.iter().map(token).collect();
    tokens.dedup();
    assert_eq!(tokens.len(), 3);

    // Claimed: in flight, no longer listed as waiting, still readable as rows.
    assert_eq!(s.depth().unwrap(), (2, 3));
    assert_eq!(
        scheduled_ids(&s),
        [(mid("d"), ms(4_000)), (mid("later"), ms(far))]
    );
    assert_eq!(retries(&s, &[mid("a"), mid("b"), mid("c")]).len(), 3);

    let second = s.claim("node-2", 10, LONG).unwrap();
    assert_eq!(ids(&second.retries), ["d"], "only what is due now");
    assert_eq!(second.next_due, Some(ms(far)));
    assert!(token(&second.retries[0]) > *tokens.iter().max().unwrap());
    assert!(s.claim("node-3", 10, LONG).unwrap().retries.is_empty());
    assert_eq!(s.depth().unwrap(), (1, 4));

    // A fate settles a claim: the row and its lease go.
    apply_done(
        &s,
        [
            acked("a", 5_000),
            dead(letter("b", "ORDER", "L1", "X", 5_001)),
        ],
    );
    assert_eq!(s.depth().unwrap(), (1, 2));
}

#[test]
fn extend_renews_only_the_claims_still_held() {
    let s = fresh_store("extend");
    apply_done(
        &s,
        [
            schedule(retry("a", 1)),
            schedule(retry("b", 2)),
            schedule(retry("c", 3)),
        ],
    );
    let claimed = s.claim("node-1", 3, LONG).unwrap().retries;
    let [a, b] = [&claimed[0], &claimed[1]];
    let held = |claims: &[(MessageId, ClaimToken)], node| s.extend(node, claims, LONG).unwrap();
    let all: Vec<_> = claimed
        .iter()
        .map(|r| (r.message.id.clone(), token(r)))
        .collect();
    assert_eq!(held(&all, "node-1"), [true, true, true]);
    assert_eq!(
        held(&all, "node-2"),
        [false, false, false],
        "another node's claims"
    );
    let wrong = [(mid("a"), ClaimToken::new(token(a).get() + 1_000).unwrap())];
    assert_eq!(held(&wrong, "node-1"), [false]);

    // a's fate is written, b is scheduled again under its claim: neither is held any more.
    apply_done(&s, [acked("a", 10), schedule_under(b, 20)]);
    assert_eq!(held(&all, "node-1"), [false, false, true]);
    assert_eq!(s.depth().unwrap(), (1, 1));
    assert_eq!(s.extend("node-1", &[], LONG).unwrap(), Vec::<bool>::new());
}

#[test]
fn reap_returns_claims_whose_lease_ran_out_and_fences_their_old_token() {
    let s = fresh_store("reap");
    apply_done(&s, [schedule(retry("kept", 1))]);
    let kept = s.claim("node-1", 1, LONG).unwrap().retries.remove(0);
    apply_done(&s, [schedule(retry("lost", 2))]);
    let lost = s.claim("node-2", 1, SHORT).unwrap().retries.remove(0);

    let reaped = reap_until(&s, 1, 5);
    assert_eq!(
        reaped.returned,
        [mid("lost")],
        "only the lease that ran out"
    );
    assert!(reaped.crash_loops.is_empty());
    // Due again at its own (past) due time, first in line; its attempt is unchanged.
    assert_eq!(scheduled_ids(&s), [(mid("lost"), ms(2))]);
    assert_eq!(retries(&s, &[mid("lost")]), [retry("lost", 2)]);
    assert_eq!(
        s.extend("node-2", &[(mid("lost"), token(&lost))], LONG)
            .unwrap(),
        [false]
    );

    // Claimed again by another node: a reclaim, under a new token.
    let again = s.claim("node-3", 10, LONG).unwrap();
    assert_eq!(ids(&again.retries), ["lost"]);
    assert_eq!(again.reclaims, 1);
    let fresh = &again.retries[0];
    assert!(token(fresh) > token(&lost));

    // The node that stalled wakes up: its retry under the old token is refused, as is one
    // under no token while the row is in flight; the new owner's goes through.
    assert_eq!(apply(&s, [schedule_under(&lost, 50)]), [Applied::Stale]);
    assert_eq!(apply(&s, [schedule(retry("lost", 50))]), [Applied::Stale]);
    assert_eq!(apply(&s, [schedule_under(fresh, 60)]), [Applied::Done]);
    assert_eq!(scheduled_ids(&s), [(mid("lost"), ms(60))]);
    // A token for a row that is due (not in flight), or gone, is stale too; a fate wins over
    // any token.
    assert_eq!(apply(&s, [schedule_under(fresh, 70)]), [Applied::Stale]);
    assert_eq!(apply(&s, [schedule_under(&kept, 70)]), [Applied::Done]);
    apply_done(&s, [acked("kept", 80)]);
    assert_eq!(
        apply(
            &s,
            [
                schedule_under(&kept, 90),
                schedule_under(&retry_as("gone", 7), 90)
            ]
        ),
        [Applied::FateAlreadyKnown(Fate::Acked), Applied::Stale]
    );
    // The stale writes changed nothing.
    assert_eq!(scheduled_ids(&s), [(mid("lost"), ms(60))]);
}

/// A retry as if claimed under token `t`.
fn retry_as(id: &str, t: u64) -> ScheduledRetry {
    claimed_as(retry(id, 1), ClaimToken::new(t).unwrap())
}

#[test]
fn a_retry_reaped_more_than_max_reaps_comes_back_as_a_crash_loop() {
    let s = fresh_store("crash-loop");
    apply_done(&s, [schedule(retry("poison", 5))]);
    let max_reaps = 2;
    for round in 1..=max_reaps {
        let claimed = s.claim("node", 1, SHORT).unwrap();
        assert_eq!(ids(&claimed.retries), ["poison"]);
        assert_eq!(claimed.reclaims, usize::from(round > 1));
        assert_eq!(
            reap_until(&s, 1, max_reaps).returned,
            [mid("poison")],
            "round {round}"
        );
    }
    s.claim("node", 1, SHORT).unwrap();
    let reaped = reap_until(&s, 1, max_reaps);
    assert!(reaped.returned.is_empty());
    let [looping] = &reaped.crash_loops[..] else {
        panic!("one crash loop: {reaped:?}")
    };
    // Leased to the reaper, whole, its attempt unchanged: the reaper dead-letters it.
    assert_eq!(*looping, claimed_as(retry("poison", 5), token(looping)));
    assert_eq!(s.depth().unwrap(), (0, 1));
    assert_eq!(
        s.extend("reaper", &[(mid("poison"), token(looping))], LONG)
            .unwrap(),
        [true]
    );
    apply_done(&s, [dead(letter("poison", "ORDER", "L9", "CRASH_LOOP", 9))]);
    assert_eq!(s.depth().unwrap(), (0, 0));
    assert_eq!(fate(&s, "poison"), Some(Fate::DeadLettered));
}

#[test]
fn a_fresh_schedule_resets_the_reap_count() {
    let s = fresh_store("reap-count");
    apply_done(&s, [schedule(retry("m", 5))]);
    s.claim("node", 1, SHORT).unwrap();
    assert_eq!(reap_until(&s, 1, 1).returned, [mid("m")]);
    let again = s.claim("node", 1, LONG).unwrap();
    assert_eq!(again.reclaims, 1);
    // The delivery fails and its retry is scheduled under the claim: a new schedule, whose
    // claims start over (not a reclaim, not one reap away from a crash loop).
    apply_done(&s, [schedule_under(&again.retries[0], 6)]);
    let next = s.claim("node", 1, SHORT).unwrap();
    assert_eq!(next.reclaims, 0);
    assert_eq!(reap_until(&s, 1, 1).returned, [mid("m")]);
}

#[test]
fn a_schedule_that_heads_the_due_set_publishes_a_wake_hint() {
    let ns = super::fresh_namespace("wake");
    let s = super::connect(&super::server().url(), &ns);
    let mut conn = super::server().client();
    let mut wake = conn.as_pubsub();
    wake.subscribe(s.keys().wake()).unwrap();
    wake.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut next = || {
        wake.get_message()
            .ok()
            .map(|m| m.get_payload::<String>().unwrap())
    };

    apply_done(&s, [schedule(retry("a", 5_000))]);
    assert_eq!(
        next().as_deref(),
        Some("5000"),
        "the first retry heads the set"
    );
    apply_done(&s, [schedule(retry("b", 9_000))]);
    assert_eq!(next(), None, "a later one does not");
    // One hint per batch, for the earliest it scheduled.
    apply_done(
        &s,
        [schedule(retry("c", 3_000)), schedule(retry("d", 2_000))],
    );
    assert_eq!(next().as_deref(), Some("2000"));
    assert_eq!(next(), None);
}
