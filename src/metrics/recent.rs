//! The process's own recent history, for the console's overview (`GET /v1/overview`): once a
//! second the admin API's sampler reads the attached topology's counters; the last
//! [`KEEP`] samples are kept (15 minutes, a fixed bound), so the overview needs no Prometheus.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rebound_runtime::stats::StatsSnapshot;
use serde::Serialize;

/// How often a sample is taken.
pub const EVERY: Duration = Duration::from_secs(1);

/// How many samples are kept: 15 minutes of one a second.
pub const KEEP: usize = 15 * 60;

/// The counters one sample reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Counters {
    new_messages: u64,
    retries_fired: u64,
    acked: u64,
    dead_lettered: u64,
}

impl Counters {
    fn of(s: &StatsSnapshot) -> Counters {
        Counters {
            new_messages: s.new_messages,
            retries_fired: s.retries_fired_by_rule.values().sum(),
            acked: s.acked,
            dead_lettered: s.dead_lettered,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: SystemTime,
    counters: Counters,
    pending: u64,
    retry_queue_depth: u64,
}

/// One second (or whatever passed between two samples) of the overview's chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// When the interval ended, in ms since the Unix epoch.
    pub at_ms: u64,
    /// New messages per second.
    pub new_per_s: f64,
    /// Retries fired per second.
    pub retries_per_s: f64,
    /// Acked per second.
    pub acked_per_s: f64,
    /// Dead-lettered per second.
    pub dead_lettered_per_s: f64,
    /// Retries fired / new messages over the interval (`null` without new messages: retries
    /// firing while nothing new comes in have no ratio).
    pub retry_ratio: Option<f64>,
    /// Trees in flight at its end.
    pub pending: u64,
    /// Scheduled retries at its end.
    pub retry_queue_depth: u64,
}

/// The recent samples; see the [module docs](self).
#[derive(Debug, Default)]
pub struct RecentRates {
    samples: Mutex<VecDeque<Sample>>,
}

fn ms(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl RecentRates {
    /// Records the counters of `snapshot` at `at`, dropping the oldest beyond [`KEEP`] + 1
    /// (the rates of [`KEEP`] intervals need one sample more).
    pub fn sample(&self, snapshot: &StatsSnapshot, at: SystemTime) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() > KEEP {
            samples.pop_front();
        }
        samples.push_back(Sample {
            at,
            counters: Counters::of(snapshot),
            pending: snapshot.pending,
            retry_queue_depth: snapshot.retry_queue_depth,
        });
    }

    /// The rates between consecutive samples, oldest first (at most [`KEEP`]).
    pub fn rates(&self) -> Vec<Rates> {
        self.rates_since(0)
    }

    /// The rates of the intervals that ended after `since_ms` (ms since the Unix epoch).
    pub fn rates_since(&self, since_ms: u64) -> Vec<Rates> {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples
            .iter()
            .zip(samples.iter().skip(1))
            .filter(|(_, b)| ms(b.at) > since_ms)
            .map(|(a, b)| {
                let secs =
                    b.at.duration_since(a.at)
                        .unwrap_or(Duration::ZERO)
                        .as_secs_f64()
                        .max(1e-3);
                let per_s = |f: fn(&Counters) -> u64| {
                    f(&b.counters).saturating_sub(f(&a.counters)) as f64 / secs
                };
                let new = b
                    .counters
                    .new_messages
                    .saturating_sub(a.counters.new_messages);
                let fired = b
                    .counters
                    .retries_fired
                    .saturating_sub(a.counters.retries_fired);
                Rates {
                    at_ms: ms(b.at),
                    new_per_s: per_s(|c| c.new_messages),
                    retries_per_s: per_s(|c| c.retries_fired),
                    acked_per_s: per_s(|c| c.acked),
                    dead_lettered_per_s: per_s(|c| c.dead_lettered),
                    retry_ratio: (new > 0).then(|| fired as f64 / new as f64),
                    pending: b.pending,
                    retry_queue_depth: b.retry_queue_depth,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(new: u64, fired: u64, acked: u64) -> StatsSnapshot {
        StatsSnapshot {
            new_messages: new,
            retries_fired_by_rule: [("a".to_owned(), fired)].into(),
            acked,
            pending: 7,
            ..StatsSnapshot::default()
        }
    }

    #[test]
    fn rates_are_the_differences_per_second_and_the_ratio_is_retries_over_new() {
        let r = RecentRates::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        r.sample(&snap(0, 0, 0), t0);
        r.sample(&snap(100, 30, 90), t0 + Duration::from_secs(1));
        r.sample(&snap(100, 50, 120), t0 + Duration::from_secs(3));
        let rates = r.rates();
        assert_eq!(rates.len(), 2);
        assert_eq!(rates[0].at_ms, 1_001_000);
        assert_eq!(
            (
                rates[0].new_per_s,
                rates[0].retries_per_s,
                rates[0].acked_per_s
            ),
            (100.0, 30.0, 90.0)
        );
        assert!((rates[0].retry_ratio.unwrap() - 0.3).abs() < 1e-12);
        // Two seconds with no new messages: per second, and no ratio.
        assert_eq!((rates[1].retries_per_s, rates[1].acked_per_s), (10.0, 15.0));
        assert_eq!(rates[1].retry_ratio, None);
        assert_eq!(rates[1].pending, 7);
        // A refresh asks only for what came after the last one it has.
        assert_eq!(r.rates_since(1_001_000), rates[1..]);
        assert!(r.rates_since(1_003_000).is_empty());
    }

    #[test]
    fn the_history_is_bounded_to_fifteen_minutes() {
        let r = RecentRates::default();
        let t0 = SystemTime::UNIX_EPOCH;
        for i in 0..(KEEP as u64 + 100) {
            r.sample(&snap(i, 0, i), t0 + Duration::from_secs(i));
        }
        let rates = r.rates();
        assert_eq!(rates.len(), KEEP);
        assert_eq!(rates.last().unwrap().at_ms, (KEEP as u64 + 99) * 1000);
        assert!(rates.iter().all(|x| x.new_per_s == 1.0));
    }
}
