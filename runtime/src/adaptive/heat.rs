//! [`Heat`]: how hot each biz is with failures, decaying by a half-life.
//!
//! Each failure adds its weight to its biz's heat; a heat halves every `half_life`:
//! `value × 2^(−Δt / half_life)`. Every biz decays at the same rate, so the process's total is
//! kept as one more decaying value, `total`, instead of summing the biz on every read: it is
//! what the sum of the biz is, except for rounding (and it is reset to zero when no biz is
//! left, so rounding never accumulates past an empty map).
//!
//! A heat is stored as `(value, at)` and decayed only when it is touched. The biz tracked are
//! bounded by [`MAX_BIZ`]: when a new biz finds the map full, the biz that decayed below
//! [`COLD`] go, and if that is not enough, the coldest tenth.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hashbrown::HashMap;
use tokio::time::Instant;

/// The most biz whose heat is tracked at once.
pub const MAX_BIZ: usize = 1000;
/// A heat below this is as good as none: the first to go when the map is full.
pub const COLD: f64 = 1e-6;

/// A heat as last touched: `value` at `at`.
#[derive(Clone, Copy, Debug)]
struct Level {
    value: f64,
    at: Instant,
}

impl Level {
    fn new(at: Instant) -> Level {
        Level { value: 0.0, at }
    }

    /// The value at `now` (never decayed backwards: an earlier `now` reads `value`).
    fn at(&self, now: Instant, half_life: Duration) -> f64 {
        let passed = now.saturating_duration_since(self.at);
        if passed.is_zero() {
            self.value
        } else if half_life.is_zero() {
            0.0
        } else {
            self.value * (-(passed.as_secs_f64() / half_life.as_secs_f64())).exp2()
        }
    }

    /// Decays to `now` and adds `weight`. A `now` before `at` (read a moment earlier, on
    /// another spout task) adds without moving `at` back.
    fn add(&mut self, weight: f64, now: Instant, half_life: Duration) {
        self.value = self.at(now, half_life) + weight;
        self.at = self.at.max(now);
    }
}

#[derive(Debug)]
struct State {
    half_life: Duration,
    by_biz: HashMap<Arc<str>, Level>,
    /// The sum of `by_biz`, decaying the same way; `at` is the latest time any heat was
    /// touched.
    total: Level,
    /// On a fleet: the heat the other live nodes reported at the last sync, per biz, and its
    /// sum (replaced at each sync, emptied when the store is down).
    others: HashMap<Arc<str>, Level>,
    others_total: Level,
}

impl State {
    /// The other nodes' heat of `biz` and in all, at `now`.
    fn others(&self, biz: &str, now: Instant) -> (f64, f64) {
        if self.others.is_empty() {
            return (0.0, 0.0);
        }
        let hl = self.half_life;
        let of = self.others.get(biz).map_or(0.0, |l| l.at(now, hl));
        (of, self.others_total.at(now, hl))
    }
}

impl State {
    /// Makes room for one more biz: drops the cold ones, then, if still full, the coldest
    /// tenth (so a stream of new biz pays for the sweep once in a hundred). What is dropped
    /// leaves the total too.
    fn make_room(&mut self, now: Instant) {
        if self.by_biz.len() < MAX_BIZ {
            return;
        }
        let (hl, at) = (self.half_life, self.total.at);
        let mut dropped = 0.0;
        self.by_biz.retain(|_, level| {
            let keep = level.at(now, hl) >= COLD;
            if !keep {
                dropped += level.at(at, hl);
            }
            keep
        });
        if self.by_biz.len() >= MAX_BIZ {
            let mut by_heat: Vec<(f64, Arc<str>)> = self
                .by_biz
                .iter()
                .map(|(biz, level)| (level.at(now, hl), biz.clone()))
                .collect();
            let coldest = MAX_BIZ / 10;
            by_heat.select_nth_unstable_by(coldest, |a, b| a.0.total_cmp(&b.0));
            for (_, biz) in &by_heat[..coldest] {
                if let Some(level) = self.by_biz.remove(biz) {
                    dropped += level.at(at, hl);
                }
            }
        }
        self.total.value = if self.by_biz.is_empty() {
            0.0
        } else {
            (self.total.value - dropped).max(0.0)
        };
    }
}

/// The fault heat of a process: one per process, shared by its spout tasks (each failure is
/// added on the task that decides it). Cheap on the failure path: one uncontended lock, and
/// no allocation for a biz already tracked. See `adaptive/heat.rs`.
///
/// ```
/// use rebound_runtime::adaptive::Heat;
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let heat = Heat::new(Duration::from_secs(30));
/// let t0 = Instant::now();
/// heat.add("PAYMENT", 3.0, t0);
/// heat.add("ORDER", 1.0, t0);
/// let later = t0 + Duration::from_secs(30);
/// assert!((heat.of("PAYMENT", later) - 1.5).abs() < 1e-9);
/// assert!((heat.total(later) - 2.0).abs() < 1e-9);
/// assert_eq!(heat.of("SHIPPING", later), 0.0);
/// ```
#[derive(Debug)]
pub struct Heat {
    /// The half-life in nanoseconds, so an unchanged one is checked without the lock.
    half_life_ns: AtomicU64,
    state: Mutex<State>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Heat {
    /// No heat yet, halving every `half_life` (zero: a heat lasts only the instant it is
    /// added).
    pub fn new(half_life: Duration) -> Heat {
        Heat {
            half_life_ns: AtomicU64::new(nanos(half_life)),
            state: Mutex::new(State {
                half_life,
                by_biz: HashMap::new(),
                total: Level::new(crate::time::now()),
                others: HashMap::new(),
                others_total: Level::new(crate::time::now()),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a failure of `biz` weighing `weight` at `now`. A weight that is negative or not
    /// finite adds nothing.
    pub fn add(&self, biz: &str, weight: f64, now: Instant) {
        self.add_and_read(biz, weight, now);
    }

    /// [`Heat::add`], then the heat of `biz` and the total at `now`, under one lock: what a
    /// decision sees as `signals.heat` and `signals.heat_total`.
    pub fn add_and_read(&self, biz: &str, weight: f64, now: Instant) -> (f64, f64) {
        let weight = if weight.is_finite() {
            weight.max(0.0)
        } else {
            0.0
        };
        let mut s = self.state();
        let hl = s.half_life;
        let heat = match s.by_biz.get_mut(biz) {
            Some(level) => {
                level.add(weight, now, hl);
                level.value
            }
            None => {
                s.make_room(now);
                s.by_biz.insert(
                    Arc::from(biz),
                    Level {
                        value: weight,
                        at: now,
                    },
                );
                weight
            }
        };
        s.total.add(weight, now, hl);
        let (of, total) = s.others(biz, now);
        (heat + of, s.total.at(now, hl) + total)
    }

    /// The heat of `biz` at `now` (0 for a biz never seen, or dropped); on a fleet, with the
    /// other nodes' heat of it.
    pub fn of(&self, biz: &str, now: Instant) -> f64 {
        let s = self.state();
        let own = s.by_biz.get(biz).map_or(0.0, |l| l.at(now, s.half_life));
        own + s.others(biz, now).0
    }

    /// The heat of every biz together at `now` (on a fleet, every node's).
    pub fn total(&self, now: Instant) -> f64 {
        let s = self.state();
        s.total.at(now, s.half_life) + s.others("", now).1
    }

    /// This node's own heat per biz at `now`, leaving out the cold ones (what it reports to
    /// the fleet).
    pub fn own_levels(&self, now: Instant) -> Vec<(String, f64)> {
        let s = self.state();
        s.by_biz
            .iter()
            .map(|(biz, l)| (biz.to_string(), l.at(now, s.half_life)))
            .filter(|(_, v)| *v >= COLD)
            .collect()
    }

    /// Takes the heat the other nodes reported, `(biz, heat, how long ago)`, in place of
    /// what they reported before (an empty list: none, as when the store is down). At most
    /// [`MAX_BIZ`] biz are kept, the hottest.
    pub fn set_others(&self, reported: &[(String, f64, Duration)], now: Instant) {
        let mut s = self.state();
        let hl = s.half_life;
        s.others.clear();
        let mut total = 0.0;
        for (biz, value, ago) in reported {
            if !value.is_finite() || *value <= 0.0 {
                continue;
            }
            let at = now.checked_sub(*ago).unwrap_or(now);
            let level = Level { value: *value, at };
            total += level.at(now, hl);
            let entry = s
                .others
                .entry(Arc::from(biz.as_str()))
                .or_insert(Level::new(now));
            let sum = entry.at(now, hl) + level.at(now, hl);
            *entry = Level {
                value: sum,
                at: now,
            };
        }
        if s.others.len() > MAX_BIZ {
            let mut by_heat: Vec<(f64, Arc<str>)> =
                s.others.iter().map(|(b, l)| (l.value, b.clone())).collect();
            by_heat.sort_by(|a, b| b.0.total_cmp(&a.0));
            let keep: std::collections::HashSet<Arc<str>> =
                by_heat.into_iter().take(MAX_BIZ).map(|(_, b)| b).collect();
            s.others.retain(|b, _| keep.contains(b));
        }
        s.others_total = Level {
            value: total,
            at: now,
        };
    }

    /// How many biz are tracked (at most [`MAX_BIZ`]).
    pub fn tracked(&self) -> usize {
        self.state().by_biz.len()
    }

    /// The half-life heats decay by.
    pub fn half_life(&self) -> Duration {
        self.state().half_life
    }

    /// Decays by `half_life` from now on (a reloaded rule set may change it). The heats are
    /// first decayed by the old one up to the latest failure added; the time since then
    /// decays by the new one. Nothing happens if it is unchanged (checked without the lock).
    pub fn set_half_life(&self, half_life: Duration) {
        if self.half_life_ns.load(Relaxed) == nanos(half_life) {
            return;
        }
        let mut s = self.state();
        let (old, at) = (s.half_life, s.total.at);
        for level in s.by_biz.values_mut() {
            *level = Level {
                value: level.at(at, old),
                at: at.max(level.at),
            };
        }
        s.half_life = half_life;
        self.half_life_ns.store(nanos(half_life), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_nodes_heat_adds_to_a_decisions_and_decays_from_when_they_reported() {
        let heat = Heat::new(Duration::from_secs(10));
        let t0 = Instant::now() + Duration::from_secs(60);
        heat.add("PAYMENT", 1.0, t0);
        // Two nodes reported PAYMENT 4 and 2, ten seconds ago: 3 now; ORDER 2 just now.
        heat.set_others(
            &[
                ("PAYMENT".into(), 4.0, Duration::from_secs(10)),
                ("PAYMENT".into(), 2.0, Duration::from_secs(10)),
                ("ORDER".into(), 2.0, Duration::ZERO),
            ],
            t0,
        );
        let (of, total) = heat.add_and_read("PAYMENT", 1.0, t0);
        assert!(close(of, 2.0 + 3.0), "{of}");
        assert!(close(total, 2.0 + 3.0 + 2.0), "{total}");
        assert_eq!(heat.own_levels(t0), [("PAYMENT".to_owned(), 2.0)]);
        // The store down: only the node's own.
        heat.set_others(&[], t0);
        assert!(close(heat.of("PAYMENT", t0), 2.0));
        assert!(close(heat.total(t0), 2.0));
    }

    const HL: Duration = Duration::from_secs(30);

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn heat_halves_every_half_life() {
        let heat = Heat::new(HL);
        let t0 = Instant::now();
        heat.add("PAYMENT", 8.0, t0);
        assert!(close(heat.of("PAYMENT", t0), 8.0));
        assert!(close(heat.of("PAYMENT", t0 + HL), 4.0));
        assert!(close(heat.of("PAYMENT", t0 + 2 * HL), 2.0));
        assert!(close(heat.of("PAYMENT", t0 + HL / 2), 8.0 / 2f64.sqrt()));
        // A read from a moment earlier (another task's clock) does not grow it.
        assert!(close(
            heat.of("PAYMENT", t0 - Duration::from_millis(5)),
            8.0
        ));
    }

    #[test]
    fn weights_add_on_the_decayed_heat() {
        let heat = Heat::new(HL);
        let t0 = Instant::now();
        heat.add("PAYMENT", 3.0, t0);
        heat.add("PAYMENT", 2.0, t0);
        assert!(close(heat.of("PAYMENT", t0), 5.0));
        let (biz, total) = heat.add_and_read("PAYMENT", 1.0, t0 + HL);
        assert!(close(biz, 3.5), "{biz}");
        assert!(close(total, 3.5), "{total}");
        // Weights that are not weights add nothing.
        for w in [-1.0, f64::NAN, f64::INFINITY] {
            heat.add("PAYMENT", w, t0 + HL);
        }
        assert!(close(heat.of("PAYMENT", t0 + HL), 3.5));
    }

    #[test]
    fn the_total_is_the_sum_of_the_biz() {
        let heat = Heat::new(HL);
        let t0 = Instant::now();
        heat.add("PAYMENT", 3.0, t0);
        heat.add("ORDER", 2.0, t0 + HL);
        let at = t0 + 3 * HL;
        let sum = heat.of("PAYMENT", at) + heat.of("ORDER", at);
        assert!(close(heat.total(at), sum));
        assert!(close(sum, 3.0 / 8.0 + 2.0 / 4.0));
        assert_eq!(heat.of("SHIPPING", at), 0.0);
    }

    #[test]
    fn a_new_half_life_decays_from_the_latest_failure_on() {
        let heat = Heat::new(Duration::from_secs(1));
        let t0 = Instant::now();
        heat.add("PAYMENT", 8.0, t0);
        heat.add("ORDER", 8.0, t0 + Duration::from_secs(1));
        heat.set_half_life(Duration::from_secs(2));
        assert_eq!(heat.half_life(), Duration::from_secs(2));
        // PAYMENT decayed one old half-life (to 4) up to the latest failure, then one new one.
        let at = t0 + Duration::from_secs(3);
        assert!(close(heat.of("PAYMENT", at), 2.0));
        assert!(close(heat.of("ORDER", at), 4.0));
        assert!(close(heat.total(at), 6.0));
        heat.set_half_life(Duration::from_secs(2)); // unchanged: nothing moves
        assert!(close(heat.total(at), 6.0));
    }

    #[test]
    fn a_zero_half_life_keeps_a_heat_only_for_its_instant() {
        let heat = Heat::new(Duration::ZERO);
        let t0 = Instant::now();
        assert_eq!(heat.add_and_read("PAYMENT", 2.0, t0), (2.0, 2.0));
        assert_eq!(heat.of("PAYMENT", t0 + Duration::from_millis(1)), 0.0);
    }

    #[test]
    fn the_biz_tracked_stay_bounded_and_the_cold_go_first() {
        let heat = Heat::new(HL);
        let t0 = Instant::now();
        for i in 0..MAX_BIZ {
            heat.add(&format!("old-{i}"), 1.0, t0);
        }
        assert_eq!(heat.tracked(), MAX_BIZ);
        // 40 half-lives on, every old heat is below COLD: the first new biz sweeps them out.
        let later = t0 + 40 * HL;
        heat.add("new-0", 1.0, later);
        assert_eq!(heat.tracked(), 1);
        assert!(close(heat.total(later), 1.0), "{}", heat.total(later));

        // Full of warm biz: the coldest tenth makes room.
        for i in 1..MAX_BIZ {
            heat.add(&format!("new-{i}"), 1.0 + i as f64, later);
        }
        heat.add("hot", 5_000.0, later);
        assert_eq!(heat.tracked(), MAX_BIZ - MAX_BIZ / 10 + 1);
        for i in 0..MAX_BIZ / 10 {
            assert_eq!(
                heat.of(&format!("new-{i}"), later),
                0.0,
                "new-{i} is among the coldest"
            );
        }
        assert!(heat.of(&format!("new-{}", MAX_BIZ / 10), later) > 0.0);
        let sum: f64 = (1..MAX_BIZ)
            .map(|i| heat.of(&format!("new-{i}"), later))
            .sum::<f64>()
            + heat.of("hot", later);
        assert!(close(heat.total(later), sum), "{} {sum}", heat.total(later));
        for i in 0..3 * MAX_BIZ {
            heat.add(&format!("more-{i}"), 1e6, later);
            assert!(heat.tracked() <= MAX_BIZ);
        }
    }
}
