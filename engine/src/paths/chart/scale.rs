//! The chart's delay axis: a log scale whose ticks are durations a person reads at a glance
//! (100 ms, 1 s, 10 s, 1 min, 10 min, 1 h, 1 d), each labelled in its own unit, and whose
//! ends are ticks, so the highest value never sits above the last label.
//!
//! A zero (full jitter's shortest delay) has no place on a log scale; the axis says it saw
//! one, and the chart draws it on a floor of its own below the first tick.
//!
//! The ticks come from one ladder of round durations. The fine rungs (2 s, 5 s, 30 s, 5 min,
//! …) are used when the axis is short enough for them; otherwise only the coarse ones, and
//! when even those are too many, every second (third, …) of them.

/// Round durations in ms, and whether each is a coarse rung.
const LADDER: &[(u64, bool)] = &[
    (1, true),
    (2, false),
    (5, false),
    (10, true),
    (20, false),
    (50, false),
    (100, true),
    (200, false),
    (500, false),
    (1_000, true),
    (2_000, false),
    (5_000, false),
    (10_000, true),
    (30_000, false),
    (MINUTE, true),
    (2 * MINUTE, false),
    (5 * MINUTE, false),
    (10 * MINUTE, true),
    (30 * MINUTE, false),
    (HOUR, true),
    (2 * HOUR, false),
    (6 * HOUR, false),
    (12 * HOUR, false),
    (DAY, true),
    (2 * DAY, false),
    (7 * DAY, true),
    (30 * DAY, true),
    (365 * DAY, true),
];

const MINUTE: u64 = 60_000;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// The most ticks an axis gets: about 35 px apart on the chart.
const MAX_TICKS: usize = 8;

/// A log-scale axis over delays in ms, from its first tick to its last.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LogAxis {
    /// The ticks, ascending; the first and last are the axis's ends.
    pub(crate) ticks: Vec<u64>,
    /// Whether some value is 0 (full jitter's shortest delay): a log scale has no place for
    /// it, so the chart gives it a floor of its own below the first tick.
    pub(crate) zero: bool,
}

impl LogAxis {
    /// The axis that holds every positive value of `values` (in ms); an axis of zeros only
    /// runs from 1 ms to 10 ms.
    pub(crate) fn covering(values: impl IntoIterator<Item = u64>) -> LogAxis {
        let (mut lo, mut hi, mut zero) = (u64::MAX, 0, false);
        for v in values {
            if v == 0 {
                zero = true;
            } else {
                (lo, hi) = (lo.min(v), hi.max(v));
            }
        }
        let (lo, hi) = if hi == 0 { (1, 10) } else { (lo, hi) };
        let ladder = ladder_to(hi);
        let fine: Vec<u64> = ladder.iter().map(|(v, _)| *v).collect();
        let ticks = ticks_on(&fine, lo, hi, 1);
        if ticks.len() <= MAX_TICKS {
            return LogAxis { ticks, zero };
        }
        let coarse: Vec<u64> = ladder.iter().filter(|r| r.1).map(|(v, _)| *v).collect();
        // Taking every n-th rung, n as long as the ladder gives at most three ticks.
        let ticks = (1..=coarse.len())
            .map(|every| ticks_on(&coarse, lo, hi, every))
            .find(|t| t.len() <= MAX_TICKS)
            .unwrap_or(ticks);
        LogAxis { ticks, zero }
    }

    /// Where `ms` sits on the axis: 0 at its first tick, 1 at its last (clamped to both);
    /// `None` for 0, which sits on the floor below.
    pub(crate) fn fraction(&self, ms: u64) -> Option<f64> {
        let lo = self.ticks.first().copied().unwrap_or(1) as f64;
        let hi = self.ticks.last().copied().unwrap_or(10) as f64;
        (ms > 0).then(|| ((ms as f64 / lo).log10() / (hi / lo).log10()).clamp(0.0, 1.0))
    }
}

/// The ladder, extended by tenfolds of a year until it reaches `hi`.
fn ladder_to(hi: u64) -> Vec<(u64, bool)> {
    let mut ladder = LADDER.to_vec();
    let mut top = 365 * DAY;
    while top < hi {
        match top.checked_mul(10) {
            Some(next) => top = next,
            None => break,
        }
        ladder.push((top, true));
    }
    if top < hi {
        ladder.push((u64::MAX, true));
    }
    ladder
}

/// The rungs from the highest one at or below `lo`, taking every `every`-th, up to the first
/// one at or above `hi`. When `lo` and `hi` are one rung, the rungs on either side are added,
/// so that the value sits mid-axis.
fn ticks_on(rungs: &[u64], lo: u64, hi: u64, every: usize) -> Vec<u64> {
    let below = rungs.iter().rposition(|r| *r <= lo).unwrap_or(0);
    let mut ticks = Vec::new();
    let mut i = below;
    loop {
        ticks.push(rungs[i]);
        if rungs[i] >= hi {
            break;
        }
        if i + every >= rungs.len() {
            // The ladder's last rung is at or above `hi` (see `ladder_to`).
            ticks.extend(rungs.last());
            break;
        }
        i += every;
    }
    if ticks.len() == 1 {
        ticks.insert(0, rungs[below.saturating_sub(every)]);
        ticks.extend(rungs.get(i + every));
        ticks.dedup();
    }
    ticks
}

/// A tick's label in the unit that reads best: `100 ms`, `5 s`, `10 min`, `6 h`, `7 d`.
pub(crate) fn tick_label(ms: u64) -> String {
    let units = [(DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (1_000, "s")];
    for (size, unit) in units {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{} {unit}", ms / size);
        }
    }
    if ms >= 1_000 {
        return format!("{} s", ms as f64 / 1_000.0);
    }
    format!("{ms} ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(axis: &LogAxis) -> Vec<String> {
        axis.ticks.iter().map(|t| tick_label(*t)).collect()
    }

    #[test]
    fn log_ticks_over_decades_are_round_durations_in_their_own_units() {
        // 100 ms up to 7 min: the fine rungs would be 12 ticks, the coarse ones are 5.
        let axis = LogAxis::covering([100, 250, 420_000]);
        assert_eq!(labels(&axis), ["100 ms", "1 s", "10 s", "1 min", "10 min"]);
        // Equal ratios are equal distances: 1 s → 10 s is as long as 100 ms → 1 s.
        let at = |ms| axis.fraction(ms).unwrap();
        let step = |a, b| at(b) - at(a);
        assert!((step(100, 1_000) - step(1_000, 10_000)).abs() < 1e-9);
        assert_eq!(at(100), 0.0);
        assert_eq!(at(600_000), 1.0);
        let mid = at(420_000);
        assert!(mid > at(60_000) && mid < 1.0, "{mid}");
        assert!(!axis.zero);
    }

    #[test]
    fn a_short_axis_takes_the_fine_rungs_and_ends_on_ticks() {
        let axis = LogAxis::covering([120, 300, 900]);
        assert_eq!(labels(&axis), ["100 ms", "200 ms", "500 ms", "1 s"]);
        let axis = LogAxis::covering([30_000, 150_000, 750_000]);
        assert_eq!(
            labels(&axis),
            ["30 s", "1 min", "2 min", "5 min", "10 min", "30 min"]
        );
    }

    #[test]
    fn a_single_value_sits_between_two_ticks() {
        let axis = LogAxis::covering([100, 100]);
        assert_eq!(labels(&axis), ["50 ms", "100 ms", "200 ms"]);
        assert!((axis.fraction(100).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(labels(&LogAxis::covering([1])), ["1 ms", "2 ms"]);
    }

    #[test]
    fn zeros_sit_on_a_floor_of_their_own() {
        let axis = LogAxis::covering([0, 1_000, 8_000]);
        assert_eq!(labels(&axis), ["1 s", "2 s", "5 s", "10 s"]);
        assert!(axis.zero);
        assert_eq!(axis.fraction(0), None);
        assert_eq!(axis.fraction(1_000), Some(0.0));
        let zeros = LogAxis::covering([0, 0]);
        assert_eq!(labels(&zeros), ["1 ms", "2 ms", "5 ms", "10 ms"]);
        assert!(zeros.zero);
    }

    #[test]
    fn a_very_long_axis_thins_its_coarse_ticks() {
        // 1 ms up to 40 years: 14 coarse rungs, every second one.
        let axis = LogAxis::covering([1, 40 * 365 * DAY]);
        assert!(axis.ticks.len() <= MAX_TICKS, "{:?}", labels(&axis));
        assert_eq!(axis.ticks[0], 1);
        assert!(*axis.ticks.last().unwrap() >= 40 * 365 * DAY);
        assert_eq!(labels(&LogAxis::covering([u64::MAX])).len(), 2);
    }

    #[test]
    fn tick_labels_pick_the_unit_that_divides() {
        assert_eq!(tick_label(500), "500 ms");
        assert_eq!(tick_label(30_000), "30 s");
        assert_eq!(tick_label(120_000), "2 min");
        assert_eq!(tick_label(6 * HOUR), "6 h");
        assert_eq!(tick_label(7 * DAY), "7 d");
        assert_eq!(tick_label(1_500), "1.5 s");
    }
}
