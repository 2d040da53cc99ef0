//! Counters for the metrics exporter: plain atomics for the hot counts, small locked maps for
//! the per-label counts (touched only on failures and retries), and fixed-bucket histograms:
//! the complete latency of acked deliveries, the delays of scheduled retries, and the time
//! each bolt component spends on one tuple.
//!
//! Spout and bolt tasks add up locally and publish once per loop pass (a bolt task: once per
//! batch of tuples), so the hot path does not contend on these.

use crate::time::Timestamp;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Histogram bounds, written as multiples of `unit_us` microseconds.
const fn bounds(unit_us: u64, values: [u64; 16]) -> [Duration; 16] {
    let mut bounds = [Duration::ZERO; 16];
    let mut i = 0;
    while i < bounds.len() {
        bounds[i] = Duration::from_micros(values[i] * unit_us);
        i += 1;
    }
    bounds
}

/// [`bounds`] in microseconds.
const US: u64 = 1;
/// [`bounds`] in milliseconds.
const MS: u64 = 1_000;

/// Upper bounds (inclusive) of the complete-latency histogram buckets; the last bucket is
/// everything above.
pub const LATENCY_BOUNDS: [Duration; 16] = bounds(
    US,
    [
        100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
        1_000_000, 2_500_000, 10_000_000, 30_000_000,
    ],
);

/// Upper bounds (inclusive) of the retry-delay histogram buckets (the real time a retry waits,
/// from 10 ms to an hour); the last bucket is everything above. As many bounds as
/// [`LATENCY_BOUNDS`], so both histograms share the [`Histogram`] type.
pub const RETRY_DELAY_BOUNDS: [Duration; 16] = bounds(
    MS,
    [
        10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000,
        600_000, 1_800_000, 3_600_000,
    ],
);

/// Upper bounds (inclusive) of the bolt-latency histogram buckets (the time a bolt task spends
/// on one tuple, from 10 µs to 10 s); the last bucket is everything above.
pub const BOLT_LATENCY_BOUNDS: [Duration; 16] = bounds(
    US,
    [
        10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
        1_000_000, 10_000_000,
    ],
);

/// The attempts `acked_by_attempt` tells apart: 1 to 5, then everything from 6 on.
pub const ACKED_ATTEMPTS: usize = 6;

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
        self.observe_times(d, 1);
    }

    /// Records `n` observations of the same duration `d` (a batch's wait), in one step.
    pub fn observe_times(&mut self, d: Duration, n: u64) {
        let nanos = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        let i = BOUND_NANOS.partition_point(|b| *b < nanos);
        self.buckets[i] += n;
        self.sum += d.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
        self.count += n;
    }

    /// Records one observation in the buckets of `bounds` (e.g. [`RETRY_DELAY_BOUNDS`],
    /// [`BOLT_LATENCY_BOUNDS`]).
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

    /// Adds a task-local histogram (with the same buckets) and clears it.
    fn add(&self, local: &mut Histogram) {
        if local.count == 0 {
            return;
        }
        for (i, c) in local.buckets.iter().enumerate() {
            if *c > 0 {
                self.buckets[i].fetch_add(*c, Relaxed);
            }
        }
        self.sum_nanos
            .fetch_add(local.sum.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
        self.count.fetch_add(local.count, Relaxed);
        *local = Histogram::default();
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
    new_messages: AtomicU64,
    acked: AtomicU64,
    acked_by_attempt: [AtomicU64; ACKED_ATTEMPTS],
    retries: AtomicU64,
    dead_lettered: AtomicU64,
    panics: AtomicU64,
    pending: AtomicI64,
    retry_queue_depth: AtomicI64,
    fuse_open_tasks: AtomicI64,
    stalled_tasks: AtomicI64,
    stalled_nanos: AtomicU64,
    pending_high_water: AtomicU64,
    task_pending_high_water: AtomicU64,
    message_timeout_nanos: AtomicU64,
    failures_by_code: Mutex<BTreeMap<String, u64>>,
    retries_by_rule: Mutex<BTreeMap<String, u64>>,
    retries_fired_by_rule: Mutex<BTreeMap<String, u64>>,
    dead_letters_by_label: Mutex<BTreeMap<String, u64>>,
    complete_latency: AtomicHistogram,
    retry_delay: AtomicHistogram,
    retry_lateness: AtomicHistogram,
    ack_wait: AtomicHistogram,
    /// Per bolt component, in the topology's order: its name and its tasks' time per tuple.
    bolt_latency: Vec<(String, AtomicHistogram)>,
    /// Each spout task's earliest due retry (wall clock), by task.
    next_retry_due: Mutex<BTreeMap<usize, Timestamp>>,
    ordered_held: AtomicI64,
    ordered_keys_blocked: AtomicI64,
    ordered_wait: AtomicHistogram,
}

/// A copy of the counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Deliveries (new messages and retries) emitted by spouts.
    pub emitted: u64,
    /// First deliveries: emitted messages that had not been delivered before (a replayed
    /// dead letter is a fresh delivery, so it counts here too).
    pub new_messages: u64,
    /// Messages whose tree completed (the spout was told `ack`).
    pub acked: u64,
    /// Acked messages by the attempt that succeeded: attempts 1 to 5, then 6 and later.
    pub acked_by_attempt: [u64; ACKED_ATTEMPTS],
    /// Retries scheduled.
    pub retries: u64,
    /// Dead letters stored (the spout was told `dead_lettered`).
    pub dead_lettered: u64,
    /// Bolt panics (each restarted its task).
    pub panics: u64,
    /// Trees in flight now, over all spout tasks (plus dead letters being stored).
    pub pending: u64,
    /// The most trees ever in flight at once, over all spout tasks (as `pending` counts them).
    pub pending_high_water: u64,
    /// The most trees one spout task ever had in flight (at most its `max_spout_pending`).
    pub task_pending_high_water: u64,
    /// The topology's message timeout (the real time a tree may take before it fails with
    /// `TIMEOUT`).
    pub message_timeout: Duration,
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
    /// Retries fired (redeliveries emitted), by the rule that decided the retry.
    pub retries_fired_by_rule: BTreeMap<String, u64>,
    /// Dead letters stored, by label.
    pub dead_letters_by_label: BTreeMap<String, u64>,
    /// Time from a delivery's emit to its tree's completion, for acked deliveries.
    pub complete_latency: Histogram,
    /// The delay of each scheduled retry (the real time it waits), bucketed by
    /// [`RETRY_DELAY_BOUNDS`].
    pub retry_delay: Histogram,
    /// How much later than its due time each retry fired (its due time: when its failure was
    /// decided plus its delay; a retry held by the fuse, a budget, a breaker or its key counts
    /// the hold), in [`LATENCY_BOUNDS`].
    pub retry_lateness: Histogram,
    /// How long each fate waited between the acker (the tree complete, or failed) and its
    /// spout task hearing it, in [`LATENCY_BOUNDS`].
    pub ack_wait: Histogram,
    /// Per bolt component (the topology's name for it): the time its tasks spent on each tuple,
    /// bucketed by [`BOLT_LATENCY_BOUNDS`].
    pub bolt_latency: BTreeMap<String, Histogram>,
    /// When the earliest retry waiting in a retry queue is due (wall clock), if one waits.
    pub next_retry_due: Option<Timestamp>,
    /// Messages held back behind an earlier message of their key (ordered keys).
    pub ordered_held: u64,
    /// Keys holding a message back, or blocked by a dead letter until an operator acts.
    pub ordered_keys_blocked: u64,
    /// How long each held message waited for its key, held to let go (in [`LATENCY_BOUNDS`]).
    pub ordered_wait: Histogram,
}

/// Counters that start at a snapshot's values (the fuse counts as one open task), e.g. to
/// show stored counts where live ones are expected.
impl From<&StatsSnapshot> for Stats {
    fn from(s: &StatsSnapshot) -> Stats {
        let signed = |n: u64| AtomicI64::new(i64::try_from(n).unwrap_or(i64::MAX));
        Stats {
            emitted: AtomicU64::new(s.emitted),
            new_messages: AtomicU64::new(s.new_messages),
            acked: AtomicU64::new(s.acked),
            acked_by_attempt: s.acked_by_attempt.map(AtomicU64::new),
            retries: AtomicU64::new(s.retries),
            dead_lettered: AtomicU64::new(s.dead_lettered),
            panics: AtomicU64::new(s.panics),
            pending: signed(s.pending),
            retry_queue_depth: signed(s.retry_queue_depth),
            fuse_open_tasks: AtomicI64::new(i64::from(s.fuse_open)),
            stalled_tasks: signed(s.stalled_spout_tasks),
            stalled_nanos: AtomicU64::new(s.stalled.as_nanos().min(u128::from(u64::MAX)) as u64),
            pending_high_water: AtomicU64::new(s.pending_high_water),
            task_pending_high_water: AtomicU64::new(s.task_pending_high_water),
            message_timeout_nanos: AtomicU64::new(nanos_of(s.message_timeout)),
            failures_by_code: Mutex::new(s.failures_by_code.clone()),
            retries_by_rule: Mutex::new(s.retries_by_rule.clone()),
            retries_fired_by_rule: Mutex::new(s.retries_fired_by_rule.clone()),
            dead_letters_by_label: Mutex::new(s.dead_letters_by_label.clone()),
            complete_latency: AtomicHistogram::from_snapshot(&s.complete_latency),
            retry_delay: AtomicHistogram::from_snapshot(&s.retry_delay),
            retry_lateness: AtomicHistogram::from_snapshot(&s.retry_lateness),
            ack_wait: AtomicHistogram::from_snapshot(&s.ack_wait),
            bolt_latency: s
                .bolt_latency
                .iter()
                .map(|(name, h)| (name.clone(), AtomicHistogram::from_snapshot(h)))
                .collect(),
            next_retry_due: Mutex::new(s.next_retry_due.map(|t| (0, t)).into_iter().collect()),
            ordered_held: signed(s.ordered_held),
            ordered_keys_blocked: signed(s.ordered_keys_blocked),
            ordered_wait: AtomicHistogram::from_snapshot(&s.ordered_wait),
        }
    }
}

fn nanos_of(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
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
    /// Counters for a topology whose bolt components are `components` (in the order their
    /// tasks name them by index, see [`Stats::merge_bolt_latency`]) and whose trees time out
    /// after `message_timeout`.
    pub(crate) fn for_topology<'a>(
        components: impl IntoIterator<Item = &'a str>,
        message_timeout: Duration,
    ) -> Stats {
        Stats {
            bolt_latency: components
                .into_iter()
                .map(|name| (name.to_owned(), AtomicHistogram::default()))
                .collect(),
            message_timeout_nanos: AtomicU64::new(nanos_of(message_timeout)),
            ..Stats::default()
        }
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let map =
            |m: &Mutex<BTreeMap<String, u64>>| m.lock().unwrap_or_else(|e| e.into_inner()).clone();
        StatsSnapshot {
            emitted: self.emitted.load(Relaxed),
            new_messages: self.new_messages.load(Relaxed),
            acked: self.acked.load(Relaxed),
            acked_by_attempt: std::array::from_fn(|i| self.acked_by_attempt[i].load(Relaxed)),
            retries: self.retries.load(Relaxed),
            dead_lettered: self.dead_lettered.load(Relaxed),
            panics: self.panics.load(Relaxed),
            pending: self.pending.load(Relaxed).max(0) as u64,
            pending_high_water: self.pending_high_water.load(Relaxed),
            task_pending_high_water: self.task_pending_high_water.load(Relaxed),
            message_timeout: Duration::from_nanos(self.message_timeout_nanos.load(Relaxed)),
            retry_queue_depth: self.retry_queue_depth.load(Relaxed).max(0) as u64,
            fuse_open: self.fuse_open_tasks.load(Relaxed) > 0,
            stalled_spout_tasks: self.stalled_tasks.load(Relaxed).max(0) as u64,
            stalled: Duration::from_nanos(self.stalled_nanos.load(Relaxed)),
            failures_by_code: map(&self.failures_by_code),
            retries_by_rule: map(&self.retries_by_rule),
            retries_fired_by_rule: map(&self.retries_fired_by_rule),
            dead_letters_by_label: map(&self.dead_letters_by_label),
            complete_latency: self.complete_latency.snapshot(),
            retry_delay: self.retry_delay.snapshot(),
            retry_lateness: self.retry_lateness.snapshot(),
            ack_wait: self.ack_wait.snapshot(),
            bolt_latency: self
                .bolt_latency
                .iter()
                .map(|(name, h)| (name.clone(), h.snapshot()))
                .collect(),
            next_retry_due: self
                .next_retry_due
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .min()
                .copied(),
            ordered_held: self.ordered_held.load(Relaxed).max(0) as u64,
            ordered_keys_blocked: self.ordered_keys_blocked.load(Relaxed).max(0) as u64,
            ordered_wait: self.ordered_wait.snapshot(),
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
    pub(crate) fn add_new_messages(&self, n: u64) {
        self.new_messages.fetch_add(n, Relaxed);
    }
    pub(crate) fn add_acked(&self, n: u64) {
        self.acked.fetch_add(n, Relaxed);
    }
    /// Adds a task's acks by attempt (see [`StatsSnapshot::acked_by_attempt`]) and clears them.
    pub(crate) fn add_acked_by_attempt(&self, local: &mut [u64; ACKED_ATTEMPTS]) {
        for (total, n) in self.acked_by_attempt.iter().zip(local.iter_mut()) {
            if *n > 0 {
                total.fetch_add(std::mem::take(n), Relaxed);
            }
        }
    }
    /// Moves the trees in flight by `delta`, and the high water with them.
    pub(crate) fn add_pending(&self, delta: i64) {
        let now = self.pending.fetch_add(delta, Relaxed) + delta;
        if delta > 0 {
            self.pending_high_water
                .fetch_max(now.max(0) as u64, Relaxed);
        }
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
    /// One spout task has `pending` trees in flight now.
    pub(crate) fn note_task_pending(&self, pending: u64) {
        self.task_pending_high_water.fetch_max(pending, Relaxed);
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
    /// A retry decided by `rule` was fired (its redelivery emitted).
    pub(crate) fn retry_fired(&self, rule: &str) {
        bump(&self.retries_fired_by_rule, rule);
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
    /// Adds a task-local complete-latency histogram and clears it.
    pub(crate) fn merge_latency(&self, local: &mut Histogram) {
        self.complete_latency.add(local);
    }
    /// Adds a task-local histogram of fates' waits between the acker and the task, and clears
    /// it.
    pub(crate) fn merge_ack_wait(&self, local: &mut Histogram) {
        self.ack_wait.add(local);
    }
    /// Adds a task-local histogram of retries' lateness, and clears it.
    pub(crate) fn merge_lateness(&self, local: &mut Histogram) {
        self.retry_lateness.add(local);
    }
    /// Moves the held messages and the blocked keys of ordered keys by these deltas.
    pub(crate) fn add_ordered(&self, held: i64, keys_blocked: i64) {
        self.ordered_held.fetch_add(held, Relaxed);
        self.ordered_keys_blocked.fetch_add(keys_blocked, Relaxed);
    }
    /// Adds a task-local histogram of held messages' waits and clears it.
    pub(crate) fn merge_ordered_wait(&self, local: &mut Histogram) {
        self.ordered_wait.add(local);
    }
    /// Adds a bolt task's local histogram of time per tuple (in [`BOLT_LATENCY_BOUNDS`]) to
    /// its component's, the `component`th of [`Stats::for_topology`], and clears it.
    pub(crate) fn merge_bolt_latency(&self, component: usize, local: &mut Histogram) {
        match self.bolt_latency.get(component) {
            Some((_, h)) => h.add(local),
            None => *local = Histogram::default(),
        }
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
        s.add_new_messages(7);
        s.add_acked_by_attempt(&mut [3, 1, 0, 0, 0, 1]);
        s.add_pending(3);
        s.note_task_pending(5);
        s.retry_fired("db-lock");
        s.add_retry_queue_depth(2);
        s.add_fuse_open(1);
        s.add_stalled_tasks(1);
        s.add_stalled(Duration::from_millis(1500));
        s.panic();
        s.failure("DB_LOCK_WAIT");
        s.retry("db-lock");
        s.retry_delay(Duration::from_secs(3));
        s.dead_letter("L3");
        s.add_ordered(4, 2);
        let mut local = Histogram::default();
        local.observe(Duration::from_millis(7));
        s.merge_latency(&mut local);
        local.observe(Duration::from_millis(30));
        s.merge_ordered_wait(&mut local);
        let s = Stats {
            message_timeout_nanos: AtomicU64::new(30_000_000_000),
            ..s
        };
        let mut bolt = Histogram::default();
        bolt.observe_in(Duration::from_micros(30), &BOLT_LATENCY_BOUNDS);
        let snap = StatsSnapshot {
            bolt_latency: [("parse".to_owned(), bolt)].into(),
            ..s.snapshot()
        };
        assert_eq!(Stats::from(&snap).snapshot(), snap);
    }

    #[test]
    fn pending_high_water_is_the_most_in_flight_over_all_tasks() {
        let s = Stats::default();
        s.add_pending(3); // task 1
        s.add_pending(2); // task 2
        s.add_pending(-3);
        s.add_pending(1);
        let snap = s.snapshot();
        assert_eq!((snap.pending, snap.pending_high_water), (3, 5));
    }

    #[test]
    fn bolt_latency_is_kept_per_component_and_acks_per_attempt() {
        let s = Stats::for_topology(["parse", "store"], Duration::from_secs(30));
        let mut local = Histogram::default();
        for us in [5, 40, 40, 2_000] {
            local.observe_in(Duration::from_micros(us), &BOLT_LATENCY_BOUNDS);
        }
        s.merge_bolt_latency(1, &mut local);
        assert_eq!(local.count, 0);
        let mut acked = [2, 0, 1, 0, 0, 4];
        s.add_acked_by_attempt(&mut acked);
        assert_eq!(acked, [0; ACKED_ATTEMPTS]);
        let snap = s.snapshot();
        assert_eq!(snap.bolt_latency["parse"].count, 0);
        let store = &snap.bolt_latency["store"];
        assert_eq!((store.count, store.buckets[0], store.buckets[2]), (4, 1, 2));
        assert_eq!(snap.acked_by_attempt, [2, 0, 1, 0, 0, 4]);
        assert_eq!(snap.message_timeout, Duration::from_secs(30));
    }
}
