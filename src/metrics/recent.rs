//! The process's own recent history, for the console's overview (`GET /v1/overview`): once a
//! second the admin API's sampler reads the attached topology's counters; the last
//! [`KEEP`] samples (and the [`WINDOW`] before them) are kept, a fixed bound, so the overview
//! needs no Prometheus.
//!
//! Each rate is a mean over the [`WINDOW`] samples up to its point (10 s at one a second), not
//! the difference of two neighbouring samples: a one-second difference is mostly the phase of
//! the sampler against the pipeline's batches (acked/s 40 beside new/s 20, a retry ratio of
//! spikes), and an operator reads a trend, not that noise.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rebound_runtime::stats::StatsSnapshot;
use serde::Serialize;

/// How often a sample is taken.
pub const EVERY: Duration = Duration::from_secs(1);

/// How many rates are kept: 15 minutes of one a second.
pub const KEEP: usize = 15 * 60;

/// How many intervals each rate is the mean of: 10 s of one sample a second.
pub const WINDOW: usize = 10;

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

/// One point of the overview's chart: the means per second over the [`WINDOW`] intervals that
/// end at it (fewer in the first seconds of a run).
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
    /// Retries fired / new messages over the window (`null` without new messages: retries
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
    /// Records the counters of `snapshot` at `at`, dropping the oldest beyond [`KEEP`] +
    /// [`WINDOW`] (the means of [`KEEP`] points need a window of samples before the first).
    pub fn sample(&self, snapshot: &StatsSnapshot, at: SystemTime) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() >= KEEP + WINDOW {
            samples.pop_front();
        }
        samples.push_back(Sample {
            at,
            counters: Counters::of(snapshot),
            pending: snapshot.pending,
            retry_queue_depth: snapshot.retry_queue_depth,
        });
    }

    /// The rates of the last [`KEEP`] points, oldest first.
    pub fn rates(&self) -> Vec<Rates> {
        self.rates_since(0)
    }

    /// The rates of the points after `since_ms` (ms since the Unix epoch), of the last
    /// [`KEEP`].
    pub fn rates_since(&self, since_ms: u64) -> Vec<Rates> {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        let first = samples.len().saturating_sub(KEEP).max(1);
        (first..samples.len())
            .filter(|&i| ms(samples[i].at) > since_ms)
            .map(|i| mean(&samples[i.saturating_sub(WINDOW)], &samples[i]))
            .collect()
    }
}

/// The means per second between samples `a` and `b` (`a` earlier).
fn mean(a: &Sample, b: &Sample) -> Rates {
    let secs =
        b.at.duration_since(a.at)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            .max(1e-3);
    let delta = |f: fn(&Counters) -> u64| f(&b.counters).saturating_sub(f(&a.counters));
    let per_s = |f: fn(&Counters) -> u64| delta(f) as f64 / secs;
    let new = delta(|c| c.new_messages);
    let fired = delta(|c| c.retries_fired);
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

    /// A pipeline whose batches land unevenly against the sampler: new messages at a steady
    /// 20/s, acks and retries in every other second (40, 0, 40, …).
    fn uneven(r: &RecentRates, t0: SystemTime, seconds: u64) {
        for s in 0..=seconds {
            let acked = 40 * s.div_ceil(2);
            let fired = 10 * s.div_ceil(2);
            r.sample(&snap(20 * s, fired, acked), t0 + Duration::from_secs(s));
        }
    }

    #[test]
    fn rates_are_means_over_the_window_so_uneven_batches_read_as_their_trend() {
        let r = RecentRates::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        uneven(&r, t0, 30);
        let rates = r.rates();
        assert_eq!(rates.len(), 30);
        // Once the window is full, every point is the mean: acked/s is new/s, not 40 or 0.
        for x in &rates[WINDOW - 1..] {
            assert_eq!(
                (x.new_per_s, x.acked_per_s, x.retries_per_s),
                (20.0, 20.0, 5.0),
                "{x:?}"
            );
            // The ratio is of the window's sums (50 / 200), not a mean of spiky ratios.
            assert!((x.retry_ratio.unwrap() - 0.25).abs() < 1e-12, "{x:?}");
        }
        // The first points have the seconds there are: the first is its one interval.
        assert_eq!((rates[0].at_ms, rates[0].acked_per_s), (1_001_000, 40.0));
        assert_eq!(rates[1].acked_per_s, 20.0);
        assert_eq!(rates[0].pending, 7);
    }

    #[test]
    fn a_rate_is_per_second_of_the_time_its_samples_span_and_without_new_messages_has_no_ratio() {
        let r = RecentRates::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        r.sample(&snap(0, 0, 0), t0);
        r.sample(&snap(100, 30, 90), t0 + Duration::from_secs(1));
        // A sampler that fell behind: two seconds between these.
        r.sample(&snap(100, 60, 120), t0 + Duration::from_secs(3));
        let rates = r.rates();
        assert_eq!(
            (
                rates[1].new_per_s,
                rates[1].retries_per_s,
                rates[1].acked_per_s
            ),
            (100.0 / 3.0, 20.0, 40.0)
        );
        assert!((rates[1].retry_ratio.unwrap() - 0.6).abs() < 1e-12);
        let r = RecentRates::default();
        for s in 0..=3 {
            r.sample(&snap(0, 5 * s, 0), t0 + Duration::from_secs(s));
        }
        assert!(
            r.rates()
                .iter()
                .all(|x| x.retry_ratio.is_none() && x.retries_per_s == 5.0)
        );
    }

    #[test]
    fn a_refresh_asks_only_for_the_points_after_the_last_it_has() {
        let r = RecentRates::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        uneven(&r, t0, 20);
        let rates = r.rates();
        assert_eq!(r.rates_since(1_015_000), rates[15..]);
        assert!(r.rates_since(1_020_000).is_empty());
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
        // The oldest point kept still has a whole window behind it.
        assert_eq!(r.samples.lock().unwrap().len(), KEEP + WINDOW);
    }
}
