//! What a source's position leaves of the fates it covers on Redis: no key of the acked fates
//! (their `{NS}:f:<id>` and their entries in `{NS}:acked:<source>` go in the script that moves
//! the position; dead-lettered fates stay), and, with the store told how a message's offset
//! names its source, a late schedule or dead letter of a message the position covers (a
//! stalled node's, or a reaped claim's) loses to the pruned acked fate.

use rebound_runtime::store::*;

use super::{connect, fresh_namespace, server};
use rebound_runtime::store::conformance::records::*;

/// The keys of namespace `ns` that match `pattern` (after the `{ns}:` prefix).
fn keys(ns: &str, pattern: &str) -> Vec<String> {
    let mut c = server().client();
    let mut keys: Vec<String> = ::redis::cmd("KEYS")
        .arg(format!("{{{ns}}}:{pattern}"))
        .query(&mut c)
        .unwrap();
    keys.sort();
    keys
}

#[test]
fn a_position_leaves_no_key_of_the_acked_fates_it_covers_and_keeps_the_dead_ones() {
    let ns = fresh_namespace("prune-keys");
    let s = connect(&server().url(), &ns);
    let acks: Vec<WriteOp> = (1..=300)
        .map(|k| acked_at(&format!("o{k:03}"), k, "orders", k))
        .collect();
    apply_done(&s, acks);
    apply_done(&s, [dead(letter("gone", "ORDER", "L1", "BAD_JSON", 301))]);
    assert_eq!(keys(&ns, "f:*").len(), 301);
    assert_eq!(keys(&ns, "acked:*"), [format!("{{{ns}}}:acked:orders")]);

    apply_done(&s, [position("orders", 200, 400)]);
    assert_eq!(
        keys(&ns, "f:*").len(),
        101,
        "the 100 above the position and the dead one"
    );
    apply_done(&s, [position("orders", 300, 401)]);
    assert_eq!(keys(&ns, "f:*"), [format!("{{{ns}}}:f:gone")]);
    assert!(
        keys(&ns, "acked:*").is_empty(),
        "{:?}",
        keys(&ns, "acked:*")
    );
    assert_eq!(fate(&s, "gone"), Some(Fate::DeadLettered));
    assert_eq!(fate(&s, "o300"), None, "behind the position");
}

#[test]
fn a_late_dead_letter_or_retry_of_a_message_its_position_covers_loses_to_the_pruned_fate() {
    let s = connect(&server().url(), &fresh_namespace("late-fates"));
    s.name_offsets(|m| {
        m.offset.map(|k| Offset {
            source: SourceName::from("orders"),
            position: k.get(),
        })
    });
    let at = |id: &str, k: u64| {
        let mut d = letter(id, "ORDER", "L1", "DB_LOCK_WAIT", 10);
        d.message = d.message.with_offset(k);
        d
    };
    let retry_at = |id: &str, k: u64| {
        let mut r = retry(id, 20);
        r.message = r.message.with_offset(k);
        r
    };
    apply_done(
        &s,
        [
            acked_at("a", 1, "orders", 1),
            acked_at("b", 2, "orders", 2),
            position("orders", 2, 3),
        ],
    );
    assert_eq!(fates(&s, &[mid("a"), mid("b")]), [], "pruned");

    // Another node still had them in flight: its fate and its retry lose, as to a kept fate.
    let late = apply(&s, [dead(at("a", 1)), schedule(retry_at("b", 2))]);
    assert_eq!(
        late,
        [
            Applied::FateAlreadyKnown(Fate::Acked),
            Applied::FateAlreadyKnown(Fate::Acked)
        ]
    );
    assert!(all_dead_letters(&s).is_empty());
    assert!(scheduled_ids(&s).is_empty());

    // Above the position, and without an offset (a replayed letter's fresh delivery), they
    // are written as before.
    let mut unplaced = letter("b", "ORDER", "L1", "DB_LOCK_WAIT", 11);
    unplaced.message.offset = None;
    let written = apply(
        &s,
        [dead(at("c", 3)), schedule(retry_at("d", 4)), dead(unplaced)],
    );
    assert_eq!(written, [Applied::Done, Applied::Done, Applied::Done]);
    assert_eq!(fate(&s, "c"), Some(Fate::DeadLettered));
    assert_eq!(fate(&s, "b"), Some(Fate::DeadLettered));
    assert_eq!(scheduled_ids(&s), [(mid("d"), ms(20))]);
}
