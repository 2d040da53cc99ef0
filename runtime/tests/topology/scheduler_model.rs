//! Model-based tests: random schedule / cancel / reschedule / advance / drain sequences run
//! against `RetryScheduler` and against a plain `BTreeMap<(due, seq), id>` reference model.
//!
//! After every operation the two must agree exactly, which pins every invariant the spec
//! names; each is also asserted on its own so a failure says which one broke:
//! never early, each scheduled entry fires at most once, a cancelled (or moved) entry never
//! fires with its old due time, equal due times all fire (in insertion order), `len` matches.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use rebound_runtime::scheduler::{Expired, RetryScheduler};
use rebound_runtime::time::Timestamp;

#[derive(Debug, Clone)]
enum Op {
    /// Schedule (or move) `id` at now + offset (offset may be negative: already due).
    Schedule(u32, i64),
    Cancel(u32),
    Reschedule(u32, i64),
    Advance(u64),
    Drain(usize),
    /// Schedule `n` ids from `first`, spread over `spread` ms from now: many share a due time,
    /// and enough of them to make the scheduler compact its slab as it drains.
    Bulk {
        first: u32,
        n: u32,
        spread: u64,
    },
}

/// The reference: entries keyed by (due, seq); `seq` grows with every (re)schedule.
#[derive(Default)]
struct Model {
    now: u64,
    seq: u64,
    order: BTreeMap<(u64, u64), u32>,
    by_id: HashMap<u32, (u64, u64)>,
    /// (id, seq) of every scheduling that was cancelled or superseded: must never fire.
    dead_tokens: HashSet<(u32, u64)>,
    /// (id, seq) of every scheduling that fired: must not fire again.
    fired_tokens: HashSet<(u32, u64)>,
}

impl Model {
    fn due_at(&self, offset: i64) -> u64 {
        self.now.saturating_add_signed(offset)
    }

    fn schedule(&mut self, id: u32, due: u64) {
        self.remove(id);
        self.seq += 1;
        self.order.insert((due, self.seq), id);
        self.by_id.insert(id, (due, self.seq));
    }

    fn remove(&mut self, id: u32) -> Option<u64> {
        let key = self.by_id.remove(&id)?;
        self.order.remove(&key);
        self.dead_tokens.insert((id, key.1));
        Some(key.0)
    }

    fn drain(&mut self, limit: usize) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(entry) = self.order.first_entry() else {
                break;
            };
            if entry.key().0 > self.now {
                break;
            }
            let ((due, seq), id) = entry.remove_entry();
            self.by_id.remove(&id);
            out.push((id, due, seq));
        }
        out
    }
}

fn op(max_id: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..max_id, -5i64..40).prop_map(|(id, o)| Op::Schedule(id, o)),
        2 => (0..max_id).prop_map(Op::Cancel),
        2 => (0..max_id, -5i64..40).prop_map(|(id, o)| Op::Reschedule(id, o)),
        3 => (0u64..15).prop_map(Op::Advance),
        3 => (1usize..12).prop_map(Op::Drain),
        1 => (0..max_id, 1u32..1500, 1u64..50)
            .prop_map(|(first, n, spread)| Op::Bulk { first, n, spread }),
    ]
}

fn check(
    fired: &[Expired<u32>],
    want: &[(u32, u64, u64)],
    model: &mut Model,
) -> Result<(), TestCaseError> {
    for e in fired {
        prop_assert!(
            e.due.as_millis() <= model.now,
            "never early: {} fired with due {} at now {}",
            e.id,
            e.due,
            model.now
        );
    }
    let got: Vec<(u32, u64)> = fired.iter().map(|e| (e.id, e.due.as_millis())).collect();
    let expected: Vec<(u32, u64)> = want.iter().map(|&(id, due, _)| (id, due)).collect();
    for &(id, due) in &got {
        if !expected.contains(&(id, due)) {
            let known: Vec<_> = model.dead_tokens.iter().filter(|(i, _)| *i == id).collect();
            prop_assert!(
                false,
                "a cancelled or moved entry fired: id {id} due {due} (its dead schedulings: {known:?})"
            );
        }
    }
    for &(id, _, seq) in want {
        prop_assert!(
            model.fired_tokens.insert((id, seq)),
            "fired twice: id {id} scheduling #{seq}"
        );
    }
    prop_assert_eq!(
        got,
        expected,
        "due order, equal due times in insertion order"
    );
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    // The scheduler reads no clock: `now` is the model's, passed to every drain.
    let mut sut = RetryScheduler::new();
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Schedule(id, offset) => {
                let due = model.due_at(offset);
                let before = model.by_id.get(&id).map(|k| k.0);
                model.schedule(id, due);
                let got = sut
                    .schedule(id, Timestamp::from_millis(due))
                    .map(|t| t.as_millis());
                prop_assert_eq!(got, before);
            }
            Op::Cancel(id) => {
                let want = model.remove(id);
                prop_assert_eq!(sut.cancel(&id).map(|t| t.as_millis()), want);
            }
            Op::Reschedule(id, offset) => {
                let due = model.due_at(offset);
                let known = model.by_id.contains_key(&id);
                if known {
                    model.schedule(id, due);
                }
                prop_assert_eq!(sut.reschedule(&id, Timestamp::from_millis(due)), known);
            }
            Op::Advance(ms) => model.now += ms,
            Op::Drain(limit) => {
                let want = model.drain(limit);
                let got = sut.drain_due(Timestamp::from_millis(model.now), limit);
                check(&got, &want, &mut model)?;
            }
            Op::Bulk { first, n, spread } => {
                for i in 0..n {
                    let due = model.now + u64::from(i) % spread;
                    model.schedule(first + i, due);
                    sut.schedule(first + i, Timestamp::from_millis(due));
                }
            }
        }
        prop_assert_eq!(sut.len(), model.by_id.len(), "len matches the model");
        prop_assert_eq!(
            sut.next_due_time().map(|t| t.as_millis()),
            model.order.keys().next().map(|k| k.0)
        );
    }
    // In the end, everything still scheduled fires, equal due times included.
    let end = model
        .order
        .keys()
        .last()
        .map_or(model.now, |k| k.0.max(model.now));
    model.now = end;
    let want = model.drain(usize::MAX);
    let got = sut.drain_due(Timestamp::from_millis(end), usize::MAX);
    check(&got, &want, &mut model)?;
    prop_assert!(sut.is_empty() && model.by_id.is_empty(), "everything fired");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Few ids: lots of cancel/reschedule hits on live entries.
    #[test]
    fn scheduler_agrees_with_btreemap_model_on_few_ids(ops in prop::collection::vec(op(12), 1..120)) {
        run(ops)?;
    }

}

proptest! {
    // Fewer, larger cases: each bulk op schedules up to ~1500 entries.
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// More ids and bulk inserts: exercises slot reuse and slab compaction while draining.
    #[test]
    fn scheduler_agrees_with_btreemap_model_through_slot_reuse_and_compaction(
        ops in prop::collection::vec(op(4000), 1..60)
    ) {
        run(ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Equal due times: many ids on a handful of due times, drained in small pieces.
    #[test]
    fn equal_due_times_all_fire_in_insertion_order(
        ids in prop::collection::vec((0u32..200, 0u64..3), 1..400),
        limit in 1usize..50,
    ) {
        let mut ops: Vec<Op> = ids.into_iter().map(|(id, due)| Op::Schedule(id, due as i64)).collect();
        ops.push(Op::Advance(3));
        ops.extend(std::iter::repeat_n(Op::Drain(limit), 20));
        run(ops)?;
    }
}
