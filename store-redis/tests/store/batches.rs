//! Batches larger than one script call: split into calls of at most 500 ops, in order, each
//! call one round trip; a batch holding a value the store cannot keep is refused before any
//! call is made.

use rebound_runtime::store::*;

use super::fresh_store;
use rebound_runtime::store::conformance::records::*;

#[test]
fn a_batch_larger_than_one_call_is_applied_in_order_in_calls_of_500() {
    let s = fresh_store("batches");
    let ids: Vec<String> = (0..700).map(|i| format!("m{i:04}")).collect();
    // Each message scheduled, then acked, with the acks of the first ones in a later call
    // than their schedules and the last schedules after a position.
    let mut ops: Vec<WriteOp> = ids.iter().map(|id| schedule(retry(id, 10))).collect();
    ops.extend(ids[..650].iter().map(|id| acked(id, 20)));
    ops.push(position("orders", 3, 30));
    ops.extend(ids[650..].iter().map(|id| schedule(retry(id, 40))));
    let before = s.round_trips();
    let applied = s.apply(&ops).unwrap();
    assert_eq!(s.round_trips() - before, 3, "1,401 ops in 3 calls");
    assert_eq!(applied, vec![Applied::Done; ops.len()]);
    let waiting: Vec<_> = ids[650..].iter().map(|id| (mid(id), ms(40))).collect();
    assert_eq!(scheduled_ids(&s), waiting);
    let all: Vec<_> = ids.iter().map(|id| mid(id)).collect();
    assert_eq!(fates(&s, &all).len(), 650);
    assert_eq!(s.position("orders").unwrap(), Some(3));
    assert_eq!(s.apply(&[]).unwrap(), []);
}

#[test]
fn a_batch_with_a_value_out_of_range_in_its_last_call_writes_nothing() {
    let s = fresh_store("batches-refused");
    let mut ops: Vec<WriteOp> = (0..1_200)
        .map(|i| schedule(retry(&format!("m{i}"), 10)))
        .collect();
    // A script compares positions as doubles: above 2^53 is refused, not rounded.
    ops.push(position("orders", (1 << 53) + 1, 30));
    let before = s.round_trips();
    let err = s.apply(&ops).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::OutOfRange {
                what: "position",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(s.round_trips(), before, "nothing sent");
    assert!(scheduled_ids(&s).is_empty());
    // 2^53 itself is exact, and kept.
    apply_done(&s, [position("orders", 1 << 53, 31)]);
    assert_eq!(s.position("orders").unwrap(), Some(1 << 53));
}
