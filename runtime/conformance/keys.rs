//! Ordered keys: a message's ordering key is kept wherever the message is (a retry row, a dead
//! letter, the fresh delivery a replay or a redrive makes), and a message without one stays
//! without.

use crate::store::*;

use super::records::*;

pub fn the_ordering_key_is_kept_in_a_retry_a_dead_letter_and_their_replay(s: &dyn Store) {
    let mut keyed = retry("o1", 5_000);
    keyed.message.key = Some("order-7".into());
    let plain = retry("o2", 6_000);
    apply_done(s, [schedule(keyed.clone()), schedule(plain.clone())]);
    assert_eq!(retries(s, &[mid("o1"), mid("o2")]), [keyed, plain]);

    let mut first = letter("p1", "PAYMENT", "L1", "PAY_PROCESSING", 300);
    first.message.key = Some("order-7".into());
    let mut second = letter("p2", "PAYMENT", "L1", "PAY_PROCESSING", 400);
    second.message.key = Some("order-8".into());
    let without = letter("p3", "PAYMENT", "L1", "PAY_PROCESSING", 500);
    apply_done(
        s,
        [dead(first.clone()), dead(second), dead(without.clone())],
    );
    let stored = s.dead_letter(&mid("p1")).unwrap().unwrap();
    assert_eq!(stored.letter, first);
    assert_eq!(s.dead_letter(&mid("p3")).unwrap().unwrap().letter, without);

    // A replay and a redrive schedule a fresh delivery with the message's key; a letter
    // without one replays without.
    let replayed = match apply(s, [WriteOp::Replay(action("p1", "alice", "fixed", 900))]).pop() {
        Some(Applied::Replayed(r)) => *r,
        other => panic!("{other:?}"),
    };
    assert_eq!(replayed.message.key, first.message.key);
    assert_eq!(
        retries(s, &[mid("p1")])[0]
            .message
            .key
            .as_ref()
            .map(|k| k.as_str()),
        Some("order-7")
    );
    let redriven = match apply(
        s,
        [WriteOp::Redrive(action(
            "p2",
            "rebound",
            "redrive 1/1",
            901,
        ))],
    )
    .pop()
    {
        Some(Applied::Replayed(r)) => *r,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        redriven.message.key.as_ref().map(|k| k.as_str()),
        Some("order-8")
    );
    let bare = match apply(s, [WriteOp::Replay(action("p3", "alice", "fixed", 902))]).pop() {
        Some(Applied::Replayed(r)) => *r,
        other => panic!("{other:?}"),
    };
    assert_eq!(bare.message.key, None);
    assert_eq!(retries(s, &[mid("p3")])[0].message.key, None);
}
