//! Cases: dead letters listed, filtered and paged, their attrs, replay and skip with their
//! refusals, and the audit log.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::fate::{GiveUpReason, RuleRef};
use crate::store::*;
use crate::topology::Failure;

use super::records::*;

// ---- dead letters ------------------------------------------------------------------------

pub fn dead_letters_filter_by_label_biz_code_and_time_newest_first(s: &dyn Store) {
    seed_dead_letters(s);
    let all = s.dead_letters(&DeadLetterFilter::default()).unwrap();
    assert_eq!(ids(&all), ["i1", "p2", "p1", "o2", "o1"]);
    assert_eq!(all.next, None);

    let by = |filter: DeadLetterFilter| s.dead_letters(&filter).unwrap();
    let l1 = by(DeadLetterFilter {
        label: Some("L1".into()),
        ..Default::default()
    });
    assert_eq!(ids(&l1), ["i1", "p1", "o1"]);
    let payment_bad_json = by(DeadLetterFilter {
        biz: Some("PAYMENT".into()),
        code: Some("BAD_JSON".into()),
        ..Default::default()
    });
    assert_eq!(ids(&payment_bad_json), ["p2"]);
    let window = by(DeadLetterFilter {
        since: Some(ms(200)),
        until: Some(ms(400)),
        ..Default::default()
    });
    assert_eq!(ids(&window), ["p1", "o2"]);

    // Every field comes back as written.
    let o2 = &window.items[1];
    assert_eq!(o2.letter, letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200));
    assert_eq!(o2.status, DeadLetterStatus::Dead);
    assert_eq!(s.dead_letter(&mid("o2")).unwrap().as_ref(), Some(o2));
}

pub fn dead_letters_page_with_a_cursor(s: &dyn Store) {
    seed_dead_letters(s);
    let mut filter = DeadLetterFilter {
        limit: 2,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = s.dead_letters(&filter).unwrap();
        seen.extend(ids(&page).into_iter().map(String::from));
        match page.next {
            Some(cursor) => filter.before = Some(cursor),
            None => break,
        }
    }
    assert_eq!(seen, ["i1", "p2", "p1", "o2", "o1"]);
}

/// A dead letter keeps the failure's attrs. What it does not keep is what no operator needs:
/// the message's source offset, its last *retried* failure (the letter's failure is the one
/// that ended it), and the failure's `retry_after`.
pub fn a_dead_letter_keeps_its_failures_attrs(s: &dyn Store) {
    let mut written = letter("m", "PAYMENT", "L2", "PAY_DECLINED", 1_000);
    written.failure = Failure::new("PAY_DECLINED", "card declined")
        .with_attr("http_status", "402")
        .with_attr("endpoint", "/pay")
        .with_attr("note", "ünïcode, \"quotes\" and {braces}")
        .with_retry_after(Duration::from_secs(30));
    written.message = written.message.with_offset(17);
    written.message.retry.failures = retry("m", 900).message.retry.failures;
    written.reason = GiveUpReason::GiveUp;
    written.rule = RuleRef::Defaults;
    apply_done(s, [dead(written.clone())]);
    let plain = letter("plain", "ORDER", "L1", "X", 1_001);
    let mut without_attrs = plain.clone();
    without_attrs.failure.attrs = BTreeMap::new();
    apply_done(s, [dead(without_attrs.clone())]);

    let stored = s.dead_letter(&mid("m")).unwrap().unwrap();
    let attrs: BTreeMap<String, String> = [
        ("endpoint", "/pay"),
        ("http_status", "402"),
        ("note", "ünïcode, \"quotes\" and {braces}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(stored.letter.failure.attrs, attrs);
    let mut expected = written;
    expected.message.offset = None;
    expected.failure.retry_after = None;
    assert_eq!(stored.letter, expected);
    // Listed the same way, and a letter without attrs reads back without.
    let listed = all_dead_letters(s);
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1], stored);
    assert_eq!(listed[0].letter, without_attrs);
}

pub fn replay_makes_a_fresh_delivery_keeps_history_and_is_audited(s: &dyn Store) {
    seed_dead_letters(s);
    let fresh = replay(s, action("p1", "  alice ", " gateway fixed ", 2_000_000)).unwrap();
    let mut delivery = message("p1", "PAYMENT");
    delivery.retry.first_delivery = Some(ms(2_000_000));
    assert_eq!(fresh.message, delivery);
    assert_eq!(fresh.due, ms(2_000_000));
    assert_eq!(fresh.message.retry.attempt, 0);
    assert_eq!(fresh.message.retry.first_delivery, Some(ms(2_000_000)));
    assert!(fresh.message.retry.failures.is_empty());
    // It is scheduled (so a restart would still deliver it) and no longer has a fate.
    assert_eq!(scheduled_ids(s), [(mid("p1"), ms(2_000_000))]);
    assert_eq!(retries(s, &[mid("p1")]), std::slice::from_ref(&fresh));
    assert_eq!(fate(s, "p1"), None);
    let dl = s.dead_letter(&mid("p1")).unwrap().unwrap();
    assert_eq!(dl.status, DeadLetterStatus::Replayed);
    assert_eq!(
        dl.letter,
        letter("p1", "PAYMENT", "L1", "PAY_PROCESSING", 300)
    );

    let audit = s.audit_log(&AuditFilter::default()).unwrap();
    assert_eq!(audit.items.len(), 1);
    let entry = &audit.items[0];
    assert_eq!(entry.action, AuditAction::Replay);
    assert_eq!(entry.message_id, mid("p1"));
    assert_eq!(entry.dead_letter, Some(dl.id));
    assert_eq!(
        (entry.operator.as_str(), entry.reason.as_str()),
        ("alice", "gateway fixed")
    );
    assert_eq!(entry.at, ms(2_000_000));

    // A second replay has nothing to replay.
    let err = replay(s, action("p1", "alice", "again", 2_000_001)).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyHandled {
                status: DeadLetterStatus::Replayed,
                ..
            }
        ),
        "{err}"
    );

    // The new delivery fails again: a second dead letter, the first one kept as history.
    apply_done(
        s,
        [dead(letter(
            "p1",
            "PAYMENT",
            "L2",
            "NET_TIMEOUT",
            2_000_100,
        ))],
    );
    let history = s
        .dead_letters(&DeadLetterFilter {
            biz: Some("PAYMENT".into()),
            ..Default::default()
        })
        .unwrap();
    let statuses: Vec<_> = history
        .items
        .iter()
        .filter(|d| d.letter.message.id == mid("p1"))
        .map(|d| d.status)
        .collect();
    assert_eq!(
        statuses,
        [DeadLetterStatus::Dead, DeadLetterStatus::Replayed]
    );
    assert_eq!(fate(s, "p1"), Some(Fate::DeadLettered));
    assert!(
        scheduled_ids(s).is_empty(),
        "the second letter drops the row"
    );
    // The latest letter is the one `dead_letter` answers, and it can be replayed in turn.
    let latest = s.dead_letter(&mid("p1")).unwrap().unwrap();
    assert_eq!(latest.status, DeadLetterStatus::Dead);
    assert_eq!(latest.letter.failure.code, "NET_TIMEOUT");
    assert!(latest.id > dl.id);
}

pub fn replayed_message_acked_afterwards_takes_the_new_fate(s: &dyn Store) {
    seed_dead_letters(s);
    replay(s, action("o1", "bob", "retry after deploy", 8)).unwrap();
    assert_eq!(apply(s, [acked("o1", 9)]), [Applied::Done]);
    assert_eq!(fate(s, "o1"), Some(Fate::Acked));
    assert!(scheduled_ids(s).is_empty());
}

pub fn skip_marks_handled_keeps_the_fate_and_is_audited(s: &dyn Store) {
    seed_dead_letters(s);
    let skipped = skip(s, action("o2", "carol", "duplicate order", 7)).unwrap();
    assert_eq!(skipped.status, DeadLetterStatus::Skipped);
    assert_eq!(
        skipped.letter,
        letter("o2", "ORDER", "L2", "DB_LOCK_WAIT", 200)
    );
    assert_eq!(s.dead_letter(&mid("o2")).unwrap(), Some(skipped));
    assert_eq!(fate(s, "o2"), Some(Fate::DeadLettered));
    assert!(scheduled_ids(s).is_empty(), "a skip schedules nothing");
    let open = s
        .dead_letters(&DeadLetterFilter {
            status: Some(DeadLetterStatus::Dead),
            ..Default::default()
        })
        .unwrap();
    assert!(!ids(&open).contains(&"o2"));
    let audit = s
        .audit_log(&AuditFilter {
            message_id: Some(mid("o2")),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(audit.items.len(), 1);
    assert_eq!(audit.items[0].action, AuditAction::Skip);
    assert_eq!(audit.items[0].operator, "carol");
    assert_eq!(audit.items[0].at, ms(7));
    let err = replay(s, action("o2", "carol", "changed my mind", 8)).unwrap_err();
    assert!(matches!(
        err,
        StoreError::AlreadyHandled {
            status: DeadLetterStatus::Skipped,
            ..
        }
    ));
}

/// An operator action the store cannot carry out is a reply ([`Applied::NoDeadLetter`],
/// [`Applied::AlreadyHandled`]), not an error: it writes nothing (no audit line, no retry)
/// and the rest of its batch is written.
pub fn replay_and_skip_refusals_come_back_as_replies_and_change_nothing(s: &dyn Store) {
    seed_dead_letters(s);
    let replay_op = |id: &str, at| WriteOp::Replay(action(id, "ops", "try", at));
    let skip_op = |id: &str, at| WriteOp::Skip(action(id, "ops", "noise", at));
    assert_eq!(
        apply(
            s,
            [
                replay_op("nope", 1),
                skip_op("nope", 2),
                schedule(retry("x", 5))
            ]
        ),
        [Applied::NoDeadLetter, Applied::NoDeadLetter, Applied::Done]
    );
    assert!(all_audit(s).is_empty());
    assert_eq!(scheduled_ids(s), [(mid("x"), ms(5))]);

    let applied = apply(s, [replay_op("o1", 3), skip_op("o2", 4)]);
    assert!(
        matches!(&applied[..], [Applied::Replayed(r), Applied::Skipped(d)]
            if r.message.id == mid("o1") && d.status == DeadLetterStatus::Skipped),
        "{applied:?}"
    );
    let before = (
        all_audit(s),
        all_dead_letters(s),
        scheduled_ids(s),
        retries(s, &[mid("o1"), mid("x")]),
    );
    assert_eq!(
        apply(
            s,
            [
                replay_op("o1", 10),
                skip_op("o1", 11),
                replay_op("o2", 12),
                skip_op("o2", 13),
            ]
        ),
        [
            Applied::AlreadyHandled(DeadLetterStatus::Replayed),
            Applied::AlreadyHandled(DeadLetterStatus::Replayed),
            Applied::AlreadyHandled(DeadLetterStatus::Skipped),
            Applied::AlreadyHandled(DeadLetterStatus::Skipped),
        ]
    );
    let after = (
        all_audit(s),
        all_dead_letters(s),
        scheduled_ids(s),
        retries(s, &[mid("o1"), mid("x")]),
    );
    assert_eq!(after, before, "a refusal writes nothing");
    assert_eq!(
        fate(s, "o1"),
        None,
        "the replay cleared it; the refusals did not touch it"
    );
    assert_eq!(fate(s, "o2"), Some(Fate::DeadLettered));
}

pub fn blank_operator_or_reason_is_refused_and_changes_nothing(s: &dyn Store) {
    seed_dead_letters(s);
    for (operator, reason, field) in [
        ("", "because", "operator"),
        ("   ", "because", "operator"),
        ("dave", "", "reason"),
        ("dave", "\t\n", "reason"),
    ] {
        // A replay and a skip are both built as an action first; a blank one never exists.
        let err = OperatorAction::new(mid("o1"), operator, reason, ms(1)).unwrap_err();
        assert!(
            matches!(err, StoreError::Blank { field: f } if f == field),
            "{err}"
        );
        assert!(err.to_string().contains(field));
    }
    assert_eq!(
        s.dead_letter(&mid("o1")).unwrap().unwrap().status,
        DeadLetterStatus::Dead
    );
    assert!(
        s.audit_log(&AuditFilter::default())
            .unwrap()
            .items
            .is_empty()
    );
    assert!(scheduled_ids(s).is_empty());
}

pub fn unknown_dead_letter_is_a_clear_not_found(s: &dyn Store) {
    let err = replay(s, action("nope", "erin", "why not", 1)).unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(ref id) if *id == mid("nope")));
    assert_eq!(err.to_string(), "no dead letter for message nope");
    let err = skip(s, action("nope", "erin", "why not", 1)).unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(_)));
    // A message that was acked has a fate but no dead letter.
    apply_done(s, [acked("acked", 1)]);
    let err = replay(s, action("acked", "erin", "why not", 2)).unwrap_err();
    assert!(matches!(err, StoreError::DeadLetterNotFound(ref id) if *id == mid("acked")));
    assert_eq!(fate(s, "acked"), Some(Fate::Acked));
}

pub fn audit_log_pages_newest_first(s: &dyn Store) {
    seed_dead_letters(s);
    for id in ["o1", "o2", "p1"] {
        skip(s, action(id, "ops", "noise", 5)).unwrap();
    }
    let first = s
        .audit_log(&AuditFilter {
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    let order: Vec<_> = first
        .items
        .iter()
        .map(|e| e.message_id.to_string())
        .collect();
    assert_eq!(order, ["p1", "o2"]);
    let second = s
        .audit_log(&AuditFilter {
            before: first.next,
            limit: 2,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert_eq!(second.items[0].message_id, mid("o1"));
    assert_eq!(second.next, None);
}
