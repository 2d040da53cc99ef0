//! Counters for the metrics exporter: plain atomics for the hot counts, small locked maps for
//! the per-label counts (touched only on failures), and two fixed-bucket histograms: the
//! complete latency of acked deliveries, and the delays of scheduled retries.
//!
//! Spout tasks add up locally and publish once per loop pass, so the hot path does not
//! contend on these.

use crate::time::Timestamp;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds (inclusive) of the complete-latency histogram buckets; the last bucket is
/// everything above.
pub const LATENCY_BOUNDS: [Duration; 16] = [
    Duration::from_micros(100),
    Duration::from_micros(250),
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_micros(2500),
    Duration::from_millis(5),
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_millis(2500),
    Duration::from_secs(10),
    Duration::from_secs(30),
];

/// Upper bounds (inclusive) of the retry-delay histogram buckets (the real time a retry waits,
/// from 10 ms to an hour); the last bucket is everything above. As many bounds as
/// [`LATENCY_BOUNDS`], so both histograms share the [`Histogram`] type.
pub const RETRY_DELAY_BOUNDS: [Duration; 16] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_millis(2500),
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(30),
    Duration::from_secs(60),
    Duration::from_secs(120),
    Duration::from_secs(300),
    Duration::from_secs(600),
    Duration::from_secs(1800),
    Duration::from_secs(3600),
];

const HIST_LEN: usize = LATENCY_BOUNDS.len() + 1;

const fn nanos(bounds: [Duration; HIST_LEN - 1]) -> [u64; HIST_LEN - 1] {
    let mut out = [0u64; HIST_LEN - 1];
    let mut i = 0;
    while i < out.len() {
        out[i] = bounds[i].as_nanos() as u64;
        i += 1;
    }
    out
}

/// The bounds in nanoseconds: comparing integers is cheaper on the hot path.
const BOUND_NANOS: [u64; HIST_LEN - 1] = nanos(LATENCY_BOUNDS);
const DELAY_BOUND_NANOS: [u64; HIST_LEN - 1] = nanos(RETRY_DELAY_BOUNDS);

/// A histogram of durations: non-cumulative bucket counts, plus sum and count. The buckets are
/// those of [`LATENCY_BOUNDS`] unless said otherwise (the retry-delay histogram uses
/// [`RETRY_DELAY_BOUNDS`]; read it with [`Histogram::quantile_in`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Counts per bucket of [`LATENCY_BOUNDS`], then the overflow bucket.
    pub buckets: [u64; HIST_LEN],
    /// Sum of observations.
    pub sum: Duration,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    /// Records one observation (in the [`LATENCY_BOUNDS`] buckets).
    pub fn observe(&mut self, d: Duration) {
        let nanos = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        let i = BOUND_NANOS.partition_point(|b| *b < nanos);
        self.buckets[i] += 1;
        self.sum += d;
        self.count += 1;
    }

    /// Records one observation in the buckets of `bounds` (e.g. [`RETRY_DELAY_BOUNDS`]).
    pub fn observe_in(&mut self, d: Duration, bounds: &[Duration; 16]) {
        let i = bounds.partition_point(|b| *b < d);
        self.buckets[i] += 1;
        self.sum += d;
        self.count += 1;
    }

    /// An estimate of quantile `q` (0..=1): the upper bound of the bucket it falls in.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        self.quantile_in(q, &LATENCY_BOUNDS)
    }

    /// [`Histogram::quantile`] for a histogram bucketed by `bounds`.
    pub fn quantile_in(&self, q: f64, bounds: &[Duration; 16]) -> Option<Duration> {
        if self.count == 0 {
            return None;
        }
        let rank = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(bounds.get(i).copied().unwrap_or(Duration::MAX));
            }
        }
        None
    }

    /// Adds another histogram with the same buckets.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.sum += other.sum;
        self.count += other.count;
    }
}

#[derive(Default)]
struct AtomicHistogram {
    buckets: [AtomicU64; HIST_LEN],
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl AtomicHistogram {
    fn from_snapshot(h: &Histogram) -> AtomicHistogram {
        AtomicHistogram {
            buckets: h.buckets.map(AtomicU64::new),
            sum_nanos: AtomicU64::new(h.sum.as_nanos().min(u128::from(u64::MAX)) as u64),
            count: AtomicU64::new(h.count),
        }
    }

    fn snapshot(&self) -> Histogram {
        let mut out = Histogram::default();
        for (i, b) in self.buckets.iter().enumerate() {
            out.buckets[i] = b.load(Relaxed);
        }
        out.sum = Duration::from_nanos(self.sum_nanos.load(Relaxed));
        out.count = self.count.load(Relaxed);
        out
    }
}

/// The runtime's live counters, shared by every task of a topology.
#[derive(Default)]
pub struct Stats {
    emitted: AtomicU64,
    acked: AtomicU64,
    retries: AtomicU64,
    dead_lettered: AtomicU64,
    panics: AtomicU64,
    pending: AtomicI64,
    retry_queue_depth: AtomicI64,
    fuse_open_tasks: AtomicI64,
    stalled_tasks: AtomicI64,
    stalled_nanos: AtomicU64,
    pending_high_water: AtomicU64,
    failures_by_code: Mutex<BTreeMap<String, u64>>,
    retries_by_rule: Mutex<BTreeMap<String, u64>>,
    dead_letters_by_label: Mutex<BTreeMap<String, u64>>,
    complete_latency: AtomicHistogram,
    retry_delay: AtomicHistogram,
    /// Each spout task's earliest due retry (wall clock), by task.
    next_retry_due: Mutex<BTreeMap<usize, Timestamp>>,
}

/// A copy of the counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Deliveries (new messages and retries) emitted by spouts.
    pub emitted: u64,
    /// Messages whose tree completed (the spout was told `ack`).
    pub acked: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Dead letters stored (the spout was told `dead_lettered`).
    pub dead_lettered: u64,
    /// Bolt panics (each restarted its task).
    pub panics: u64,
    /// Trees in flight now, over all spout tasks (plus dead letters being stored).
    pub pending: u64,
    /// The most trees one spout task ever had in flight.
    pub pending_high_water: u64,
    /// Messages waiting in retry queues now.
    pub retry_queue_depth: u64,
    /// Whether any spout task's retry fuse is open.
    pub fuse_open: bool,
    /// Spout tasks stalled now: at `max_spout_pending` with no tree finished for a second, so
    /// that nothing new or retried goes out until trees finish or time out.
    pub stalled_spout_tasks: u64,
    /// Time spout tasks have spent stalled, summed over the tasks.
    pub stalled: Duration,
    /// Failed trees by failure code (including `TIMEOUT`, `PANIC`, `UNACKED`).
    pub failures_by_code: BTreeMap<String, u64>,
    /// Retries scheduled, by deciding rule.
    pub retries_by_rule: BTreeMap<String, u64>,
    /// Dead letters stored, by label.
    pub dead_letters_by_label: BTreeMap<String, u64>,
    /// Time from a delivery's emit to its tree's completion, for acked deliveries.
    pub complete_latency: Histogram,
    /// The delay of each scheduled retry (the real time it waits), bucketed by
    /// [`RETRY_DELAY_BOUNDS`].
    pub retry_delay: Histogram,
    /// When the earliest retry waiting in a retry queue is due (wall clock), if one waits.
    pub next_retry_due: Option<Timestamp>,
}

/// Counters that start at a snapshot's values (the fuse counts as one open task), e.g. to
/// show stored counts where live ones are expected.
impl From<&StatsSnapshot> for Stats {
    fn from(s: &StatsSnapshot) -> Stats {
        let signed = |n: u64| AtomicI64::new(i64::try_from(n).unwrap_or(i64::MAX));
        Stats {
            emitted: AtomicU64::new(s.emitted),
            acked: AtomicU64::new(s.acked),
            retries: AtomicU64::new(s.retries),
            dead_lettered: AtomicU64::new(s.dead_lettered),
            panics: AtomicU64::new(s.panics),
            pending: signed(s.pending),
            retry_queue_depth: signed(s.retry_queue_depth),
            fuse_open_tasks: AtomicI64::new(i64::from(s.fuse_open)),
            stalled_tasks: signed(s.stalled_spout_tasks),
            stalled_nanos: AtomicU64::new(s.stalled.as_nanos().min(u128::from(u64::MAX)) as u64),
            pending_high_water: AtomicU64::new(s.pending_high_water),
            failures_by_code: Mutex::new(s.failures_by_code.clone()),
            retries_by_rule: Mutex::new(s.retries_by_rule.clone()),
            dead_letters_by_label: Mutex::new(s.dead_letters_by_label.clone()),
            complete_latency: AtomicHistogram::from_snapshot(&s.complete_latency),
            retry_delay: AtomicHistogram::from_snapshot(&s.retry_delay),
            next_retry_due: Mutex::new(s.next_retry_due.map(|t| (0, t)).into_iter().collect()),
        }
    }
}

fn bump(map: &Mutex<BTreeMap<String, u64>>, key: &str) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

impl Stats {
    /// A copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let map =
            |m: &Mutex<BTreeMap<String, u64>>| m.lock().unwrap_or_else(|e| e.into_inner()).clone();
        StatsSnapshot {
            emitted: self.emitted.load(Relaxed),
            acked: self.acked.load(Relaxed),
            retries: self.retries.load(Relaxed),
            dead_lettered: self.dead_lettered.load(Relaxed),
            panics: self.panics.load(Relaxed),
            pending: self.pending.load(Relaxed).max(0) as u64,
            pending_high_water: self.pending_high_water.load(Relaxed),
            retry_queue_depth: self.retry_queue_depth.load(Relaxed).max(0) as u64,
            fuse_open: self.fuse_open_tasks.load(Relaxed) > 0,
            stalled_spout_tasks: self.stalled_tasks.load(Relaxed).max(0) as u64,
            stalled: Duration::from_nanos(self.stalled_nanos.load(Relaxed)),
            failures_by_code: map(&self.failures_by_code),
            retries_by_rule: map(&self.retries_by_rule),
            dead_letters_by_label: map(&self.dead_letters_by_label),
            complete_latency: self.complete_latency.snapshot(),
            retry_delay: self.retry_delay.snapshot(),
            next_retry_due: self
                .next_retry_due
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .min()
                .copied(),
        }
    }

    /// Spout task `task`'s earliest due retry is now `due` (`None`: its queue is empty).
    pub(crate) fn set_next_retry_due(&self, task: usize, due: Option<Timestamp>) {
        let mut next = self
            .next_retry_due
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match due {
            Some(due) => next.insert(task, due),
            None => next.remove(&task),
        };
    }

    pub(crate) fn add_emitted(&self, n: u64) {
        self.emitted.fetch_add(n, Relaxed);
    }
    pub(crate) fn add_acked(&self, n: u64) {
        self.acked.fetch_add(n, Relaxed);
    }
    pub(crate) fn add_pending(&self, delta: i64) {
        self.pending.fetch_add(delta, Relaxed);
    }
    pub(crate) fn add_retry_queue_depth(&self, delta: i64) {
        self.retry_queue_depth.fetch_add(delta, Relaxed);
    }
    pub(crate) fn add_fuse_open(&self, delta: i64) {
        self.fuse_open_tasks.fetch_add(delta, Relaxed);
    }
    pub(crate) fn add_stalled_tasks(&self, delta: i64) {
        self.stalled_tasks.fetch_add(delta, Relaxed);
    }
    pub(crate) fn add_stalled(&self, d: Duration) {
        if !d.is_zero() {
            let nanos = d.as_nanos().min(u128::from(u64::MAX)) as u64;
            self.stalled_nanos.fetch_add(nanos, Relaxed);
        }
    }
    pub(crate) fn note_pending(&self, pending: u64) {
        self.pending_high_water.fetch_max(pending, Relaxed);
    }
    pub(crate) fn panic(&self) {
        self.panics.fetch_add(1, Relaxed);
    }
    pub(crate) fn failure(&self, code: &str) {
        bump(&self.failures_by_code, code);
    }
    pub(crate) fn retry(&self, rule: &str) {
        self.retries.fetch_add(1, Relaxed);
        bump(&self.retries_by_rule, rule);
    }
    pub(crate) fn retry_delay(&self, delay: Duration) {
        let nanos = delay.as_nanos().min(u128::from(u64::MAX)) as u64;
        let h = &self.retry_delay;
        h.buckets[DELAY_BOUND_NANOS.partition_point(|b| *b < nanos)].fetch_add(1, Relaxed);
        h.sum_nanos.fetch_add(nanos, Relaxed);
        h.count.fetch_add(1, Relaxed);
    }
    pub(crate) fn dead_letter(&self, label: &str) {
        self.dead_lettered.fetch_add(1, Relaxed);
        bump(&self.dead_letters_by_label, label);
    }
    /// Adds a task-local histogram and clears it.
    pub(crate) fn merge_latency(&self, local: &mut Histogram) {
        if local.count == 0 {
            return;
        }
        let h = &self.complete_latency;
        for (i, c) in local.buckets.iter().enumerate() {
            if *c > 0 {
                h.buckets[i].fetch_add(*c, Relaxed);
            }
        }
        h.sum_nanos
            .fetch_add(local.sum.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
        h.count.fetch_add(local.count, Relaxed);
        *local = Histogram::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_quantiles() {
        let mut h = Histogram::default();
        for _ in 0..90 {
            h.observe(Duration::from_micros(50));
        }
        for _ in 0..10 {
            h.observe(Duration::from_millis(3));
        }
        assert_eq!(h.quantile(0.5), Some(Duration::from_micros(100)));
        assert_eq!(h.quantile(0.99), Some(Duration::from_millis(5)));
        let s = Stats::default();
        s.merge_latency(&mut h);
        assert_eq!(h.count, 0);
        assert_eq!(s.snapshot().complete_latency.count, 100);
    }

    #[test]
    fn retry_delays_land_in_their_own_buckets() {
        let s = Stats::default();
        for (rule, delay) in [
            ("db-lock", Duration::from_millis(40)),
            ("db-lock", Duration::from_secs(90)),
            ("stock", Duration::from_secs(7200)),
        ] {
            s.retry(rule);
            s.retry_delay(delay);
        }
        let snap = s.snapshot();
        assert_eq!(snap.retries, 3);
        assert_eq!(snap.retries_by_rule["db-lock"], 2);
        let h = &snap.retry_delay;
        assert_eq!(h.count, 3);
        assert_eq!(h.buckets[1], 1); // <= 50 ms
        assert_eq!(h.buckets[11], 1); // <= 2 min
        assert_eq!(h.buckets[16], 1); // above an hour
        assert_eq!(
            h.quantile_in(0.5, &RETRY_DELAY_BOUNDS),
            Some(Duration::from_secs(120))
        );
        // The same delays observed into a plain histogram land in the same buckets.
        let mut plain = Histogram::default();
        for delay in [40, 90_000, 7_200_000].map(Duration::from_millis) {
            plain.observe_in(delay, &RETRY_DELAY_BOUNDS);
        }
        assert_eq!(&plain, h);
    }

    #[test]
    fn counters_started_from_a_snapshot_read_back_the_same_snapshot() {
        let s = Stats::default();
        s.add_emitted(9);
        s.add_acked(4);
        s.add_pending(3);
        s.note_pending(5);
        s.add_retry_queue_depth(2);
        s.add_fuse_open(1);
        s.add_stalled_tasks(1);
        s.add_stalled(Duration::from_millis(1500));
        s.panic();
        s.failure("DB_LOCK_WAIT");
        s.retry("db-lock");
        s.retry_delay(Duration::from_secs(3));
        s.dead_letter("L3");
        let mut local = Histogram::default();
        local.observe(Duration::from_millis(7));
        s.merge_latency(&mut local);
        let snap = s.snapshot();
        assert_eq!(Stats::from(&snap).snapshot(), snap);
    }
}
