//! The shared store answers as the embedded one: random batches of every op (a few message
//! ids, two sources, the decision log) applied to SQLite, the model, and to Redis give the same answers, and
//! after each batch the same reads.

use proptest::prelude::*;
use rebound_runtime::store::*;

use super::fresh_store;
use rebound_runtime::store::conformance::records::*;

const IDS: [&str; 4] = ["a", "b", "c", "d"];
const SOURCES: [&str; 2] = ["orders", "payments"];

fn op() -> impl Strategy<Value = WriteOp> {
    let id = || prop::sample::select(&IDS[..]);
    let source = prop::sample::select(&SOURCES[..]);
    let at = 1u64..60;
    prop_oneof![
        3 => (id(), at.clone()).prop_map(|(id, due)| schedule(retry(id, due))),
        2 => (id(), at.clone()).prop_map(|(id, at)| acked(id, at)),
        2 => (id(), at.clone(), source.clone(), 1u64..8)
            .prop_map(|(id, at, src, pos)| acked_at(id, at, src, pos)),
        2 => (id(), at.clone(), prop::sample::select(&["L1", "L2"][..]))
            .prop_map(|(id, at, label)| dead(letter(id, "ORDER", label, "X", at))),
        2 => (source, 0u64..9, at.clone()).prop_map(|(src, pos, at)| position(src, pos, at)),
        2 => (id(), at.clone()).prop_map(|(id, at)| WriteOp::Replay(action(id, "ops", "fixed", at))),
        1 => (id(), at.clone()).prop_map(|(id, at)| WriteOp::Skip(action(id, "ops", "noise", at))),
        1 => (prop::collection::vec((id(), at), 0..4), 0u64..6).prop_map(|(entries, keep)| {
            log(entries.into_iter().map(|(id, at)| logged(id, at)).collect(), keep)
        }),
    ]
}

/// Everything a store shows about the model's ids and sources.
#[derive(Debug, PartialEq)]
struct Reads {
    scheduled: Vec<(MessageId, rebound_runtime::time::Timestamp)>,
    retries: Vec<ScheduledRetry>,
    fates: Vec<(MessageId, Fate)>,
    dead_letters: Vec<StoredDeadLetter>,
    latest: Vec<Option<StoredDeadLetter>>,
    open_l1: Vec<DeadLetterId>,
    audit: Vec<AuditEntry>,
    audit_of_a: Vec<AuditEntry>,
    positions: Vec<Option<u64>>,
    decisions: Vec<rebound_engine::release::LoggedDecision>,
    decisions_since_30: Vec<rebound_engine::release::LoggedDecision>,
    newest_two_decisions: Vec<rebound_engine::release::LoggedDecision>,
}

fn reads(s: &dyn Store) -> Reads {
    let ids = IDS.map(mid);
    let open_l1 = s
        .dead_letters(&DeadLetterFilter {
            label: Some("L1".into()),
            status: Some(DeadLetterStatus::Dead),
            since: Some(ms(10)),
            ..Default::default()
        })
        .unwrap();
    Reads {
        scheduled: s.scheduled().unwrap(),
        retries: retries(s, &ids),
        fates: fates(s, &ids),
        dead_letters: all_dead_letters(s),
        latest: ids.iter().map(|id| s.dead_letter(id).unwrap()).collect(),
        open_l1: open_l1.items.iter().map(|d| d.id).collect(),
        audit: all_audit(s),
        audit_of_a: s
            .audit_log(&AuditFilter {
                message_id: Some(mid("a")),
                ..Default::default()
            })
            .unwrap()
            .items,
        positions: SOURCES.iter().map(|src| s.position(src).unwrap()).collect(),
        decisions: decision_log(s),
        decisions_since_30: s
            .decisions(&DecisionFilter {
                since: Some(ms(30)),
                limit: None,
            })
            .unwrap(),
        newest_two_decisions: s
            .decisions(&DecisionFilter {
                since: None,
                limit: Some(2),
            })
            .unwrap(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn redis_answers_and_reads_as_sqlite_does(
        batches in prop::collection::vec(prop::collection::vec(op(), 1..5), 1..10)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(dir.path()).unwrap();
        let redis = fresh_store("model");
        for (step, batch) in batches.iter().enumerate() {
            let model = sqlite.apply(batch).unwrap();
            let shared = redis.apply(batch).unwrap();
            prop_assert_eq!(&shared, &model, "answers at step {}: {:?}", step, batch);
            prop_assert_eq!(reads(&redis), reads(&sqlite), "reads after step {}", step);
        }
    }
}
