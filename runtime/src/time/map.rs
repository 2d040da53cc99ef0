//! Between the topology's types (tokio instants, `Arc<str>` ids, `Bytes`) and the store's
//! (millisecond [`Timestamp`]s, owned strings and byte vectors).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::time::Instant;

use crate::clock::Timestamp;
use crate::fate::DeadLetter;
use crate::store;
use crate::time_source::TimeSource;
use crate::topology::{Headers, LastFailure, Message, MessageId, PolicyVersion, RetryMeta, RuleId};

/// Maps the runtime's monotonic instants to the store's wall-clock timestamps and back, through
/// one pair of readings taken at creation. Within the process the mapping follows the
/// monotonic clock (a stepped wall clock does not move due times); across processes the
/// timestamps are plain Unix milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct TimeMap {
    base: Instant,
    base_ms: u64,
}

impl TimeMap {
    /// Reads `time` once.
    pub fn new(time: &dyn TimeSource) -> TimeMap {
        TimeMap {
            base: time.now(),
            base_ms: wall_ms(time.wall()),
        }
    }

    /// The timestamp of `at`, rounded up to the millisecond: a due time never moves earlier.
    /// Clamped at [`Timestamp::MAX`], never wrapped.
    pub fn due_timestamp(&self, at: Instant) -> Timestamp {
        match at.checked_duration_since(self.base) {
            Some(after) => {
                let ms = u64::try_from(after.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
                let ms = self
                    .base_ms
                    .saturating_add(ms)
                    .min(Timestamp::MAX.as_millis());
                Timestamp::from_millis(ms)
            }
            None => {
                let before = (self.base - at).as_millis() as u64;
                Timestamp::from_millis(self.base_ms.saturating_sub(before))
            }
        }
    }

    /// The timestamp of `at`, rounded down: "now" never runs ahead.
    pub fn now_timestamp(&self, at: Instant) -> Timestamp {
        match at.checked_duration_since(self.base) {
            Some(after) => {
                Timestamp::from_millis(self.base_ms.saturating_add(after.as_millis() as u64))
            }
            None => {
                let before = (self.base - at).as_nanos().div_ceil(1_000_000) as u64;
                Timestamp::from_millis(self.base_ms.saturating_sub(before))
            }
        }
    }

    /// The instant of `ts`. A timestamp before this process started maps to the base instant,
    /// which has passed: it is due at once.
    pub fn instant(&self, ts: Timestamp) -> Instant {
        let ms = ts.as_millis();
        if ms >= self.base_ms {
            let after = Duration::from_millis(ms - self.base_ms);
            // Far enough never to come; an Instant that cannot hold it waits a century.
            self.base
                .checked_add(after)
                .unwrap_or_else(|| self.base + Duration::from_secs(100 * 365 * 86_400))
        } else {
            self.base
                .checked_sub(Duration::from_millis(self.base_ms - ms))
                .unwrap_or(self.base)
        }
    }
}

/// Unix milliseconds of a wall-clock time (0 before the epoch).
pub fn wall_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The wall-clock time of a timestamp.
pub fn system_time(ts: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ts.as_millis())
}

/// The store's id for a topology id.
pub fn store_id(id: &MessageId) -> store::MessageId {
    store::MessageId(id.as_str().to_owned())
}

fn store_message(m: &Message) -> store::Message {
    store::Message {
        id: store_id(&m.id),
        biz: m.biz.to_string(),
        payload: m.payload.to_vec(),
        headers: m
            .headers
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }
}

/// The store's record of a retry: the message, its due time and its metadata (which the spout
/// task has already updated with the failure and the decision).
pub fn scheduled_retry(m: &Message, due: Timestamp) -> store::ScheduledRetry {
    let last = m.retry.last_failure.as_deref();
    store::ScheduledRetry {
        message: store_message(m),
        due,
        meta: store::RetryMeta {
            attempt: m.retry.attempt,
            first_seen: Timestamp::from_millis(m.retry.first_delivery.map_or(0, wall_ms)),
            last_code: last.map(|l| l.code.clone()).unwrap_or_default(),
            last_message: last.map(|l| l.message.clone()).unwrap_or_default(),
            last_delay: last.map_or(Duration::ZERO, |l| l.delay),
            rule: store::RuleId(last.map(|l| l.rule.0.to_string()).unwrap_or_default()),
            rule_set_version: store::RuleSetVersion(
                last.map(|l| l.version.0.to_string()).unwrap_or_default(),
            ),
        },
    }
}

/// The message of a stored retry, with the metadata it had. A replayed dead letter (attempt 0)
/// comes back as a fresh delivery: no last failure, first delivery at the replay.
pub fn restored_message(r: &store::ScheduledRetry) -> Message {
    let headers: Headers = r.message.headers.iter().collect();
    let meta = &r.meta;
    let last_failure = (meta.attempt > 0).then(|| {
        Box::new(LastFailure {
            code: meta.last_code.clone(),
            message: meta.last_message.clone(),
            at: system_time(r.due)
                .checked_sub(meta.last_delay)
                .unwrap_or(UNIX_EPOCH),
            delay: meta.last_delay,
            rule: RuleId::from(meta.rule.0.as_str()),
            version: PolicyVersion::from(meta.rule_set_version.0.as_str()),
        })
    });
    Message {
        id: MessageId::from(r.message.id.0.as_str()),
        biz: Arc::from(r.message.biz.as_str()),
        payload: Bytes::from(r.message.payload.clone()),
        headers,
        retry: RetryMeta {
            attempt: meta.attempt,
            first_delivery: Some(system_time(meta.first_seen)),
            last_failure,
        },
    }
}

/// The store's record of a dead letter. (The failure's attributes are not kept: the store has
/// no column for them.)
pub fn dead_letter(d: &DeadLetter) -> store::DeadLetter {
    store::DeadLetter {
        message: store::Message {
            id: store_id(&d.id),
            biz: d.biz.to_string(),
            payload: d.payload.to_vec(),
            headers: d
                .headers
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        },
        label: d.label.clone(),
        reason: d.reason.to_string(),
        last_code: d.last_code.clone(),
        last_message: d.last_message.clone(),
        attempts: d.attempts,
        first_time: Timestamp::from_millis(wall_ms(d.first_at)),
        last_time: Timestamp::from_millis(wall_ms(d.last_at)),
        rule: store::RuleId(d.rule.0.to_string()),
        rule_set_version: store::RuleSetVersion(d.version.0.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time_source::TokioTime;

    #[tokio::test]
    async fn a_due_time_past_every_clock_is_clamped_not_wrapped() {
        let time = TokioTime::new();
        let map = TimeMap::new(&time);
        let far = time.now() + crate::fate::MAX_RETRY_DELAY;
        assert_eq!(map.due_timestamp(far), Timestamp::MAX);
        assert!(map.instant(Timestamp::MAX) > time.now());
    }

    #[tokio::test(start_paused = true)]
    async fn due_times_round_up_and_now_rounds_down() {
        let time = TokioTime::new();
        let map = TimeMap::new(&time);
        let t = time.now() + Duration::from_micros(1500);
        let due = map.due_timestamp(t);
        let now = map.now_timestamp(t);
        assert_eq!(due.as_millis() - now.as_millis(), 1);
        assert!(map.instant(due) >= t, "a due time never maps earlier");
        assert!(map.instant(now) <= t, "now never maps later");
        // Long before the process started: due at once.
        assert!(map.instant(Timestamp::from_millis(5)) <= time.now());
    }

    #[test]
    fn a_retry_round_trips_through_the_store_types() {
        let mut m = Message::new("order-7", "PAYMENT", "{}").with_header("k", "v");
        m.retry.attempt = 2;
        m.retry.first_delivery = Some(UNIX_EPOCH + Duration::from_millis(1_000));
        m.retry.last_failure = Some(Box::new(LastFailure {
            code: "PAY_PROCESSING".into(),
            message: "still".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_900),
            delay: Duration::from_millis(100),
            rule: "payment-processing".into(),
            version: "0123456789abcdef".into(),
        }));
        let stored = scheduled_retry(&m, Timestamp::from_millis(2_000));
        let back = restored_message(&stored);
        assert_eq!(back, m);
    }
}
