//! The cases: each starts its own broker through the harness and checks one promise of
//! `sources.md` as a user would notice it (what the handler saw, what the broker holds, what
//! the store holds).

use std::time::Duration;

use super::kit::{Delivery, Seen, per_id, policy, stored, topology, until};
use super::{SourceHarness, SourceSpec};
use crate::fate::memory::FixedPolicy;
use crate::fate::{DeadLetter, GiveUpReason, RuleRef};
use crate::store::{DeadLetterFilter, ScheduledRetry, Store, WriteOp};
use crate::time::Timestamp;
use crate::topology::{Config, Failure, Message, NextMessage, Ordered, OrderingConfig, Spout};

fn spec(consumer: &str, max_unacked: u64, durable: Option<crate::durable::Durable>) -> SourceSpec {
    SourceSpec {
        consumer: consumer.into(),
        max_unacked,
        batch: 10,
        durable,
    }
}

fn ok(_: &Delivery) -> Result<(), Failure> {
    Ok(())
}

/// `SLOW` fails its first delivery (the retry waits an hour), the rest succeed.
fn slow_fails_once(d: &Delivery) -> Result<(), Failure> {
    if d.biz == "SLOW" && d.attempt == 1 {
        return Err(Failure::new("LATER", "not yet"));
    }
    Ok(())
}

fn poison(d: &Delivery) -> Result<(), Failure> {
    if d.biz == "POISON" {
        return Err(Failure::new("POISON", "never"));
    }
    Ok(())
}

/// Takes `n` messages from a source directly, as a spout task would, acknowledging none.
async fn take(source: &mut dyn Spout, n: usize, secs: u64) -> Vec<Message> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while got.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} read",
            got.len()
        );
        match source.next() {
            NextMessage::Ready(m) => got.push(m),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    got
}

fn ids(messages: &[Message]) -> Vec<String> {
    let mut ids: Vec<String> = messages.iter().map(|m| m.id.to_string()).collect();
    ids.sort();
    ids
}

pub async fn every_message_is_processed_once_and_an_hour_long_retry_holds_nothing_at_the_broker<
    H: SourceHarness,
>() {
    let h = H::start();
    for i in 1..=100 {
        let biz = if i % 10 == 0 { "SLOW" } else { "ORDER" };
        h.publish(biz, None, &format!("{{\"n\":{i}}}"));
    }
    let s = stored();
    let seen = Seen::default();
    let source = h.source(spec("node-1", 1_100, Some(s.durable.clone())));
    let t = topology(
        source,
        Config::default(),
        seen.clone(),
        slow_fails_once,
        Duration::ZERO,
    );
    let running = t.start(s.durable.seams(policy()));
    until("100 messages processed", 60, || per_id(&seen).len() == 100).await;
    // The ten SLOW ones wait an hour in the store (custody: each is acknowledged at the broker
    // once its retry is committed, so the store is asked first: a broker's count read from
    // its statistics may be a snapshot older than the deliveries, and say 0 too soon).
    let store = s.store.clone();
    until("the ten SLOW retries in the store", 60, || {
        store.scheduled().map_or(0, |s| s.len()) == 10
    })
    .await;
    until("nothing unacknowledged at the broker", 60, || {
        h.unacked() == 0
    })
    .await;
    assert!(
        per_id(&seen).values().all(|&n| n == 1),
        "each processed once: {:?}",
        per_id(&seen)
    );
    let payloads: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.payload.clone())
        .collect();
    assert!(
        payloads.contains(&"{\"n\":1}".to_owned()),
        "the payload as published"
    );
    // And they still wait there, with nothing for them at the broker.
    let store = s.store.clone();
    let scheduled = tokio::task::spawn_blocking(move || store.scheduled().unwrap())
        .await
        .unwrap();
    assert_eq!(scheduled.len(), 10);
    running.shutdown(Duration::from_secs(5)).await;
}

pub async fn the_unacknowledged_stay_within_the_bound_plus_a_batch<H: SourceHarness>() {
    let h = H::start();
    for i in 1..=200 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let s = stored();
    let seen = Seen::default();
    // 20 trees in flight at most, and a read batch of 10.
    let source = h.source(spec("node-1", 20 + 10, Some(s.durable.clone())));
    let config = Config {
        max_spout_pending: 20,
        ..Config::default()
    };
    let t = topology(source, config, seen.clone(), ok, Duration::from_millis(2));
    let running = t.start(s.durable.seams(policy()));
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while per_id(&seen).len() < 200 {
        assert!(tokio::time::Instant::now() < deadline, "200 not processed");
        most = most.max(h.unacked());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        most > 0,
        "nothing was ever unacknowledged: the case measured nothing"
    );
    assert!(
        most <= 30,
        "{most} unacknowledged at the broker, above 20 + 10"
    );
    until("nothing unacknowledged", 60, || h.unacked() == 0).await;
    running.shutdown(Duration::from_secs(5)).await;
}

pub async fn a_consumer_killed_before_custody_gets_what_it_held_again<H: SourceHarness>() {
    let h = H::start();
    for i in 1..=10 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let mut a = h.source(spec("node-1", 1_100, None));
    let first = take(&mut *a, 10, 30).await;
    drop(a); // killed: nothing acknowledged
    assert_eq!(h.unacked_after_death(), 10);
    let wait = 30 + h.redelivery_after().as_secs();
    let mut again = h.source(spec("node-1", 1_100, None));
    let second = take(&mut *again, 10, wait).await;
    assert_eq!(
        ids(&second),
        ids(&first),
        "the same messages, with the same ids"
    );
    for m in &second {
        again.ack(&m.id);
    }
    until("all acknowledged", 30, || h.unacked() == 0).await;
}

pub async fn a_redelivered_message_in_the_store_s_custody_is_acknowledged_not_processed<
    H: SourceHarness,
>() {
    let h = H::start();
    for i in 1..=5 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let s = stored();
    let mut a = h.source(spec("node-1", 1_100, Some(s.durable.clone())));
    let mut read = take(&mut *a, 5, 30).await;
    drop(a);
    read.sort_by(|x, y| x.id.as_str().cmp(y.id.as_str()));
    // Before the crash the store committed the first retries of two and the dead letter of a
    // third: their custody acks were lost with the process.
    let retry = |m: &Message| WriteOp::Schedule(ScheduledRetry::new(m.clone(), Timestamp::MAX));
    let letter = DeadLetter {
        message: read[2].clone(),
        failure: Failure::new("POISON", "never"),
        label: "L3".into(),
        reason: GiveUpReason::GiveUp,
        rule: RuleRef::Rule("suite".into()),
        version: FixedPolicy::version(),
        at: Timestamp::now(),
    };
    let ops = vec![
        retry(&read[0]),
        retry(&read[1]),
        WriteOp::DeadLetter(Box::new(letter)),
    ];
    let store = s.store.clone();
    tokio::task::spawn_blocking(move || store.apply(&ops).unwrap())
        .await
        .unwrap();

    let wait = 30 + h.redelivery_after().as_secs();
    let mut again = h.source(spec("node-1", 1_100, Some(s.durable.clone())));
    let handed = take(&mut *again, 2, wait).await;
    assert_eq!(
        ids(&handed),
        ids(&read[3..]),
        "only the two the store does not hold"
    );
    until("the three in custody acknowledged", 30, || h.unacked() == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        matches!(again.next(), NextMessage::Idle),
        "nothing else is handed out"
    );
}

pub async fn the_broker_killed_and_restarted_loses_nothing<H: SourceHarness>() {
    let mut h = H::start();
    for i in 1..=100 {
        h.publish("ORDER", None, &format!("{{\"n\":{i}}}"));
    }
    let s = stored();
    let seen = Seen::default();
    let source = h.source(spec("node-1", 1_100, Some(s.durable.clone())));
    let config = Config {
        max_spout_pending: 20,
        ..Config::default()
    };
    let t = topology(source, config, seen.clone(), ok, Duration::from_millis(3));
    let running = t.start(s.durable.seams(policy()));
    until("some processed", 60, || per_id(&seen).len() >= 20).await;
    h.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.restart();
    until("all 100 processed", 120, || per_id(&seen).len() == 100).await;
    until("nothing unacknowledged", 120, || h.unacked() == 0).await;
    running.shutdown(Duration::from_secs(5)).await;
}

pub async fn a_poison_message_ends_as_a_dead_letter_and_nothing_stays_pending<H: SourceHarness>() {
    let h = H::start();
    for i in 1..=20 {
        let biz = if i % 4 == 0 { "POISON" } else { "ORDER" };
        h.publish(biz, None, &format!("{{\"n\":{i}}}"));
    }
    let s = stored();
    let seen = Seen::default();
    let source = h.source(spec("node-1", 1_100, Some(s.durable.clone())));
    let t = topology(
        source,
        Config::default(),
        seen.clone(),
        poison,
        Duration::ZERO,
    );
    let running = t.start(s.durable.seams(policy()));
    until("20 processed", 60, || per_id(&seen).len() == 20).await;
    until("nothing unacknowledged", 60, || h.unacked() == 0).await;
    let store = s.store.clone();
    let letters = tokio::task::spawn_blocking(move || {
        store
            .dead_letter_count(&DeadLetterFilter::default())
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(letters, 5, "each poison message is a dead letter");
    running.shutdown(Duration::from_secs(5)).await;
}

/// Fails the first delivery of every fourth message of a key (its retry comes 20 ms later).
fn every_fourth_fails_once(d: &Delivery) -> Result<(), Failure> {
    if seq(d).is_multiple_of(4) && d.attempt == 1 {
        return Err(Failure::new("LATER", "not yet"));
    }
    Ok(())
}

/// The sequence number in a payload `KEY:SEQ`.
fn seq(d: &Delivery) -> u64 {
    d.payload
        .rsplit(':')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub async fn ordered_keys_stay_in_order_across_retries<H: SourceHarness>() {
    let h = H::start();
    for i in 1..=30u64 {
        let key = format!("k{}", i % 3);
        h.publish("ORDER", Some(&key), &format!("{key}:{i}"));
    }
    let s = stored();
    let seen = Seen::default();
    let source = h.source(spec("node-1", 1_100, Some(s.durable.clone())));
    let config = Config {
        ordering: OrderingConfig {
            ordered: Ordered::All,
            ..OrderingConfig::default()
        },
        ..Config::default()
    };
    let t = topology(
        source,
        config,
        seen.clone(),
        every_fourth_fails_once,
        Duration::ZERO,
    );
    let quick = FixedPolicy {
        base_delay: Duration::from_millis(20),
        ..FixedPolicy::default()
    };
    let running = t.start(s.durable.seams(quick));
    let done = |seen: &Seen| {
        let seen = seen.lock().unwrap();
        seen.iter()
            .filter(|d| every_fourth_fails_once(d).is_ok())
            .count()
            == 30
    };
    until("30 handled", 60, || done(&seen)).await;
    let handled: Vec<Delivery> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|d| every_fourth_fails_once(d).is_ok())
        .cloned()
        .collect();
    for k in 0..3 {
        let key = format!("k{k}:");
        let order: Vec<u64> = handled
            .iter()
            .filter(|d| d.payload.starts_with(&key))
            .map(seq)
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "key k{k} handled out of order");
        assert_eq!(order.len(), 10);
    }
    until("nothing unacknowledged", 60, || h.unacked() == 0).await;
    running.shutdown(Duration::from_secs(5)).await;
}

pub async fn credentials_are_never_shown<H: SourceHarness>() {
    let h = H::start();
    let (texts, secret) = h
        .shown()
        .expect("the harness gives what the source shows of a URL with a password");
    assert!(!secret.is_empty() && !texts.is_empty());
    for text in texts {
        assert!(!text.contains(&secret), "the password is shown: {text}");
    }
}
