//! Groupings: which task(s) of a consuming bolt get each tuple.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use super::tuple::Value;

/// How a bolt's input stream is split across the bolt's tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// Spread evenly (round robin per emitting task).
    Shuffle,
    /// Tuples with equal values in these fields go to the same task.
    Fields(Vec<String>),
    /// Every task gets a copy (each copy is its own edge in the tuple tree).
    All,
    /// Everything goes to the task with the lowest index.
    Global,
}

/// A grouping compiled against the source's fields and the target's task numbers.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    kind: RouteKind,
    /// Global numbers of the target bolt's tasks.
    tasks: Range<usize>,
}

#[derive(Clone, Debug)]
enum RouteKind {
    Shuffle { next: usize },
    Fields { indices: Vec<usize> },
    All,
    Global,
}

impl Route {
    pub(crate) fn shuffle(tasks: Range<usize>) -> Route {
        Route {
            kind: RouteKind::Shuffle { next: 0 },
            tasks,
        }
    }
    pub(crate) fn fields(indices: Vec<usize>, tasks: Range<usize>) -> Route {
        Route {
            kind: RouteKind::Fields { indices },
            tasks,
        }
    }
    pub(crate) fn all(tasks: Range<usize>) -> Route {
        Route {
            kind: RouteKind::All,
            tasks,
        }
    }
    pub(crate) fn global(tasks: Range<usize>) -> Route {
        Route {
            kind: RouteKind::Global,
            tasks,
        }
    }

    /// Appends the global task numbers that get a tuple with `values` to `out`.
    #[inline]
    pub(crate) fn select(&mut self, values: &[Value], out: &mut Vec<usize>) {
        match self.select_one(values) {
            Some(task) => out.push(task),
            None => out.extend(self.tasks.clone()),
        }
    }

    /// The one task that gets a tuple with `values`, or `None` when every task gets a copy
    /// (the `all` grouping).
    #[inline]
    pub(crate) fn select_one(&mut self, values: &[Value]) -> Option<usize> {
        let n = self.tasks.len();
        match &mut self.kind {
            RouteKind::Shuffle { next } => {
                let task = self.tasks.start + *next;
                *next = if *next + 1 == n { 0 } else { *next + 1 };
                Some(task)
            }
            RouteKind::Fields { indices } => {
                let mut h = FxHasher(0);
                for &i in indices.iter() {
                    values.get(i).unwrap_or(&Value::Null).hash(&mut h);
                }
                Some(self.tasks.start + (h.finish() % n as u64) as usize)
            }
            RouteKind::All => None,
            RouteKind::Global => Some(self.tasks.start),
        }
    }
}

/// A small, fixed (so deterministic across runs) multiplicative hasher for the fields grouping.
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        // Final avalanche so that the low bits used by `%` depend on every input bit.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_grouping_is_stable_and_spreads() {
        let mut r = Route::fields(vec![0], 10..14);
        let mut seen = [0usize; 4];
        for i in 0..400 {
            let v = [Value::from(format!("key-{i}"))];
            let mut a = Vec::new();
            let mut b = Vec::new();
            r.select(&v, &mut a);
            r.select(&v, &mut b);
            assert_eq!(a, b);
            seen[a[0] - 10] += 1;
        }
        assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
    }

    #[test]
    fn shuffle_all_global() {
        let mut out = Vec::new();
        let mut s = Route::shuffle(3..5);
        for _ in 0..4 {
            s.select(&[], &mut out);
        }
        assert_eq!(out, vec![3, 4, 3, 4]);
        out.clear();
        Route::all(3..6).select(&[], &mut out);
        assert_eq!(out, vec![3, 4, 5]);
        out.clear();
        Route::global(7..9).select(&[], &mut out);
        assert_eq!(out, vec![7]);
    }
}
