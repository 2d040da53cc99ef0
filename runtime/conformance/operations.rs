//! The operator's side of the contract: every failure kept, the filters, counts and gauges of
//! the dead letters, expiry and redrive, the scheduled-retry view with retry-now and kill,
//! and the audit log's filters.

use std::time::Duration;

use crate::fate::{DeadLetter, GiveUpReason, Label, RuleRef};
use crate::store::*;
use crate::topology::{Failure, FailureRecord};

use super::records::*;

fn failure(attempt: u32, code: &str, at: u64) -> FailureRecord {
    FailureRecord {
        attempt,
        at: ms(at),
        code: code.into(),
        message: format!("{code} #{attempt}"),
        attrs: [("attempt".to_owned(), attempt.to_string())].into(),
        rule: RuleRef::Rule(format!("rule-{code}").as_str().into()),
        version: v1(),
        delay: Some(Duration::from_millis(u64::from(attempt) * 100)),
    }
}

/// A letter whose message failed with `codes` before the last failure (`LAST`).
fn letter_after(id: &str, codes: &[&str], at: u64) -> DeadLetter {
    let mut d = letter(id, "PAYMENT", "L2", "LAST", at);
    for (i, code) in codes.iter().enumerate() {
        d.message
            .retry
            .failures
            .push(failure(i as u32 + 1, code, at - 100 + i as u64));
    }
    d.message.retry.attempt = codes.len() as u32 + 1;
    d
}

fn open_filter() -> DeadLetterFilter {
    DeadLetterFilter {
        status: Some(DeadLetterStatus::Dead),
        ..DeadLetterFilter::default()
    }
}

pub fn every_failure_is_kept_in_order_with_attrs_in_a_retry_and_its_dead_letter(s: &dyn Store) {
    let mut r = retry("m", 5_000);
    r.message.retry.failures = Default::default();
    for (i, code) in ["NET_TIMEOUT", "DB_LOCK_WAIT", "HTTP_503"]
        .iter()
        .enumerate()
    {
        r.message
            .retry
            .failures
            .push(failure(i as u32 + 1, code, 1_000 + i as u64));
    }
    apply_done(s, [schedule(r.clone())]);
    assert_eq!(retries(s, &[mid("m")]), [r.clone()]);

    let d = letter_after("m", &["NET_TIMEOUT", "DB_LOCK_WAIT", "HTTP_503"], 9_000);
    apply_done(s, [dead(d.clone())]);
    let stored = s.dead_letter(&mid("m")).unwrap().unwrap();
    assert_eq!(stored.letter, d);
    let all = stored.letter.failures();
    let codes: Vec<&str> = all.records().iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, ["NET_TIMEOUT", "DB_LOCK_WAIT", "HTTP_503", "LAST"]);
    assert_eq!(all.records()[1].attrs["attempt"], "2");
    assert_eq!(all.records()[3].delay, None);
    assert_eq!(all.records()[3].attrs["http_status"], "503");
}

pub fn beyond_thirty_two_failures_the_first_and_last_sixteen_are_kept(s: &dyn Store) {
    let codes: Vec<String> = (1..=40).map(|i| format!("C{i}")).collect();
    let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
    let d = letter_after("many", &codes, 90_000);
    apply_done(s, [dead(d)]);
    let stored = s.dead_letter(&mid("many")).unwrap().unwrap();
    let all = stored.letter.failures();
    assert_eq!(all.records().len(), 32);
    assert_eq!(all.dropped(), 9, "40 retried + the last = 41, 32 kept");
    assert_eq!(all.records()[0].code, "C1");
    assert_eq!(all.records()[15].code, "C16");
    assert_eq!(all.records()[31].code, "LAST");
}

pub fn dead_letters_filter_by_rule_message_status_text_and_overdue_and_count(s: &dyn Store) {
    let mut a = letter("pay-1", "PAYMENT", "L1", "PAY_DECLINED", 1_000);
    a.failure.message = "card declined by issuer".into();
    let mut b = letter("pay-2", "PAYMENT", "L2", "NET_TIMEOUT", 2_000);
    b.rule = RuleRef::Rule("net".into());
    let c = letter("ord-3", "ORDER", "L1", "DB_LOCK_WAIT", 3_000);
    apply_done(s, [dead(a), dead(b), dead(c)]);
    skip(s, action("ord-3", "ops", "fixed by hand", 4_000)).unwrap();

    let ids = |f: &DeadLetterFilter| -> Vec<String> {
        let page = s.dead_letters(f).unwrap();
        assert_eq!(
            s.dead_letter_count(f).unwrap(),
            page.items.len() as u64,
            "count of {f:?}"
        );
        page.items
            .iter()
            .map(|d| d.letter.message.id.to_string())
            .collect()
    };
    let rule = DeadLetterFilter {
        rule: Some("net".into()),
        ..DeadLetterFilter::default()
    };
    assert_eq!(ids(&rule), ["pay-2"]);
    let message = DeadLetterFilter {
        message_id: Some(mid("pay-1")),
        ..DeadLetterFilter::default()
    };
    assert_eq!(ids(&message), ["pay-1"]);
    assert_eq!(ids(&open_filter()), ["pay-2", "pay-1"]);
    let skipped = DeadLetterFilter {
        status: Some(DeadLetterStatus::Skipped),
        ..DeadLetterFilter::default()
    };
    assert_eq!(ids(&skipped), ["ord-3"]);
    let text = DeadLetterFilter {
        q: Some("declined by".into()),
        ..DeadLetterFilter::default()
    };
    assert_eq!(ids(&text), ["pay-1"]);
    let by_id = DeadLetterFilter {
        q: Some("ord-".into()),
        ..DeadLetterFilter::default()
    };
    assert_eq!(ids(&by_id), ["ord-3"]);
    // L1 letters before 1_500 are overdue (pay-1); L2 has no SLA; the skipped one is not open.
    let overdue = DeadLetterFilter {
        overdue: Some(vec![("L1".into(), ms(3_500))]),
        ..DeadLetterFilter::default()
    };
    assert_eq!(ids(&overdue), ["pay-1"]);
    assert_eq!(
        s.dead_letter_count(&DeadLetterFilter::default()).unwrap(),
        3
    );
    assert!(DeadLetterFilter::default().is_empty());
    assert!(!rule.is_empty());
}

pub fn open_letters_are_counted_by_label_with_the_overdue_and_the_oldest(s: &dyn Store) {
    apply_done(
        s,
        [
            dead(letter("a", "ORDER", "L1", "X", 1_000)),
            dead(letter("b", "ORDER", "L1", "X", 5_000)),
            dead(letter("c", "ORDER", "L2", "X", 2_000)),
            dead(letter("d", "ORDER", "L2", "X", 3_000)),
        ],
    );
    skip(s, action("c", "ops", "done", 6_000)).unwrap();
    let mut open = s.open_letters(&[("L1".into(), ms(2_000))]).unwrap();
    open.sort_by(|x, y| x.label.cmp(&y.label));
    assert_eq!(
        open,
        [
            OpenLetters {
                label: "L1".into(),
                open: 2,
                overdue: 1,
                oldest: ms(1_000)
            },
            OpenLetters {
                label: "L2".into(),
                open: 1,
                overdue: 0,
                oldest: ms(3_000)
            },
        ]
    );
}

pub fn expiry_marks_an_open_letter_expired_keeps_it_and_is_audited(s: &dyn Store) {
    let d = letter("old", "ORDER", "L4", "X", 1_000);
    apply_done(s, [dead(d.clone())]);
    apply_done(
        s,
        [WriteOp::Expire(action("old", "rebound", "expired", 9_000))],
    );
    let stored = s.dead_letter(&mid("old")).unwrap().unwrap();
    assert_eq!(stored.status, DeadLetterStatus::Expired);
    assert_eq!(stored.letter, d, "kept whole");
    assert_eq!(fate(s, "old"), Some(Fate::DeadLettered));
    // Not open any more: a second expiry and a redrive are refused; an operator may still
    // replay it.
    let again = apply(
        s,
        [WriteOp::Expire(action("old", "rebound", "again", 9_001))],
    );
    assert_eq!(again, [Applied::AlreadyHandled(DeadLetterStatus::Expired)]);
    let redrive = apply(
        s,
        [WriteOp::Redrive(action(
            "old",
            "rebound",
            "redrive 1/1",
            9_002,
        ))],
    );
    assert_eq!(
        redrive,
        [Applied::AlreadyHandled(DeadLetterStatus::Expired)]
    );
    assert!(s.open_letters(&[]).unwrap().is_empty());
    let replayed = replay(s, action("old", "alice", "still wanted", 9_003)).unwrap();
    assert_eq!(replayed.message.id, mid("old"));
    let audit = s.audit_log(&AuditFilter::default()).unwrap().items;
    let actions: Vec<AuditAction> = audit.iter().map(|e| e.action).collect();
    assert_eq!(actions, [AuditAction::Replay, AuditAction::Expire]);
    assert_eq!(audit[1].operator, "rebound");
    assert_eq!(audit[1].dead_letter, Some(stored.id));
}

pub fn a_redrive_counts_in_the_message_and_its_next_letter(s: &dyn Store) {
    apply_done(s, [dead(letter("r", "ORDER", "L1", "X", 1_000))]);
    let applied = apply(
        s,
        [WriteOp::Redrive(action(
            "r",
            "rebound",
            "redrive 1/2 (label L1)",
            2_000,
        ))],
    );
    let Applied::Replayed(fresh) = &applied[0] else {
        panic!("{applied:?}")
    };
    assert_eq!(fresh.message.retry.redrives, 1);
    assert_eq!(fresh.message.retry.attempt, 0);
    assert_eq!(retries(s, &[mid("r")])[0].message.retry.redrives, 1);
    // Dead-lettered again, the letter remembers the redrive; an operator's replay keeps it.
    let mut again = letter("r", "ORDER", "L1", "X", 3_000);
    again.message.retry.redrives = 1;
    apply_done(s, [dead(again)]);
    assert_eq!(
        s.dead_letter(&mid("r"))
            .unwrap()
            .unwrap()
            .letter
            .message
            .retry
            .redrives,
        1
    );
    let replayed = replay(s, action("r", "alice", "once more", 4_000)).unwrap();
    assert_eq!(replayed.message.retry.redrives, 1);
    let audit = s.audit_log(&AuditFilter::default()).unwrap().items;
    assert_eq!(audit[1].action, AuditAction::Replay);
    assert_eq!(audit[1].reason, "redrive 1/2 (label L1)");
}

pub fn scheduled_retries_are_listed_soonest_first_filtered_and_paged(s: &dyn Store) {
    let mut ops = Vec::new();
    for (id, due) in [("c", 3_000), ("a", 1_000), ("b", 1_000), ("d", 4_000)] {
        let mut r = retry(id, due);
        if id == "d" {
            r.message.biz = "PAYMENT".into();
            let last = r.message.retry.failures.last_mut().unwrap();
            last.code = "NET_TIMEOUT".into();
            last.rule = RuleRef::Rule("net".into());
        }
        ops.push(schedule(r));
    }
    apply_done(s, ops);
    let page = |f: &RetryFilter| -> (Vec<String>, Option<RetryCursor>) {
        let p = s.scheduled_retries(f).unwrap();
        (
            p.items.iter().map(|r| r.message.id.to_string()).collect(),
            p.next,
        )
    };
    let first = RetryFilter {
        limit: 2,
        ..RetryFilter::default()
    };
    let (ids, next) = page(&first);
    assert_eq!(ids, ["a", "b"]);
    let next = next.expect("more");
    assert_eq!(next.to_string().parse::<RetryCursor>().unwrap(), next);
    let (ids, next) = page(&RetryFilter {
        after: Some(next),
        ..first.clone()
    });
    assert_eq!((ids, next), (vec!["c".to_owned(), "d".to_owned()], None));
    for f in [
        RetryFilter {
            biz: Some("PAYMENT".into()),
            ..RetryFilter::default()
        },
        RetryFilter {
            code: Some("NET_TIMEOUT".into()),
            ..RetryFilter::default()
        },
        RetryFilter {
            rule: Some("net".into()),
            ..RetryFilter::default()
        },
    ] {
        assert_eq!(page(&f).0, ["d"], "{f:?}");
    }
}

pub fn retry_now_moves_a_scheduled_retry_keeps_its_attempt_and_is_audited(s: &dyn Store) {
    apply_done(
        s,
        [
            schedule(retry("later", 90_000)),
            schedule(retry("soon", 5_000)),
        ],
    );
    apply_done(
        s,
        [WriteOp::RetryNow(action(
            "later",
            "bob",
            "dependency is back",
            1_000,
        ))],
    );
    assert_eq!(
        scheduled_ids(s),
        [(mid("later"), ms(1_000)), (mid("soon"), ms(5_000))]
    );
    assert_eq!(retries(s, &[mid("later")])[0].message.retry.attempt, 2);
    let refused = apply(
        s,
        [WriteOp::RetryNow(action("nobody", "bob", "why", 1_000))],
    );
    assert_eq!(refused, [Applied::NoRetry]);
    let audit = s.audit_log(&AuditFilter::default()).unwrap().items;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, AuditAction::RetryNow);
    assert_eq!(audit[0].dead_letter, None);
    assert_eq!(audit[0].operator, "bob");
}

pub fn a_kill_is_a_dead_letter_and_an_audit_line_in_one_batch(s: &dyn Store) {
    apply_done(s, [schedule(retry("k", 90_000))]);
    let mut d = letter("k", "ORDER", "L3", "DB_LOCK_WAIT", 2_000);
    d.reason = GiveUpReason::Killed;
    d.label = Label::from("L3");
    d.failure = Failure::new("DB_LOCK_WAIT", "lock wait");
    apply_done(
        s,
        [
            dead(d.clone()),
            WriteOp::Audit(AuditAction::Kill, action("k", "carol", "poison", 2_000)),
        ],
    );
    assert!(scheduled_ids(s).is_empty());
    let stored = s.dead_letter(&mid("k")).unwrap().unwrap();
    assert_eq!(stored.letter.reason, GiveUpReason::Killed);
    let audit = s.audit_log(&AuditFilter::default()).unwrap().items;
    assert_eq!(audit[0].action, AuditAction::Kill);
    assert_eq!(audit[0].dead_letter, Some(stored.id));
}

pub fn the_audit_log_filters_by_operator_action_and_time(s: &dyn Store) {
    apply_done(
        s,
        [
            dead(letter("x", "ORDER", "L1", "X", 1_000)),
            dead(letter("y", "ORDER", "L1", "X", 1_000)),
            dead(letter("z", "ORDER", "L1", "X", 1_000)),
        ],
    );
    apply(
        s,
        [
            WriteOp::Replay(action("x", "alice", "r", 2_000)),
            WriteOp::Skip(action("y", "bob", "s", 3_000)),
            WriteOp::Skip(action("z", "alice", "s", 4_000)),
        ],
    );
    let who = |f: AuditFilter| -> Vec<String> {
        s.audit_log(&f)
            .unwrap()
            .items
            .iter()
            .map(|e| e.message_id.to_string())
            .collect()
    };
    let alice = AuditFilter {
        operator: Some("alice".into()),
        ..AuditFilter::default()
    };
    assert_eq!(who(alice), ["z", "x"]);
    let skips = AuditFilter {
        action: Some(AuditAction::Skip),
        ..AuditFilter::default()
    };
    assert_eq!(who(skips), ["z", "y"]);
    let window = AuditFilter {
        since: Some(ms(2_500)),
        until: Some(ms(4_000)),
        ..AuditFilter::default()
    };
    assert_eq!(who(window), ["y"]);
    let paged = AuditFilter {
        operator: Some("alice".into()),
        limit: 1,
        ..AuditFilter::default()
    };
    let first = s.audit_log(&paged).unwrap();
    assert_eq!(first.items[0].message_id, mid("z"));
    let rest = s
        .audit_log(&AuditFilter {
            before: first.next,
            ..paged
        })
        .unwrap();
    assert_eq!(rest.items[0].message_id, mid("x"));
    assert_eq!(rest.next, None);
}
