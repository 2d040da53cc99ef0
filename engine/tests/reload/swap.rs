//! No torn reads: while sets with different answers are swapped in over and over, every
//! decision is the answer of the set whose version it reports.

use crate::support::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rebound_engine::reload::{ReloadOptions, Reloader, Source};
use rebound_engine::{FailureContext, PolicyHandle, Version};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const DECIDERS: usize = 3;
const MIN_SWAPS: usize = 1_000;

/// Decides continuously until `stop`; panics on a decision that does not match the answer
/// of the version it reports. Returns the decisions made per version.
fn decide_until(
    handle: &PolicyHandle,
    answers: &HashMap<Version, u64>,
    stop: &AtomicBool,
    saw_both: &AtomicUsize,
) -> HashMap<Version, u64> {
    let mut rng = SmallRng::seed_from_u64(7);
    let ctx = FailureContext::new("PAYMENT", "PAY_PROCESSING", 1);
    let mut seen: HashMap<Version, u64> = HashMap::new();
    let mut reported = false;
    while !stop.load(Ordering::Relaxed) {
        let decided = handle.decide(&ctx, &mut rng);
        let report = decided.report(1);
        let expected = answers
            .get(&decided.version)
            .unwrap_or_else(|| panic!("unknown version {}", decided.version));
        assert_eq!(
            report.delay_ms,
            Some(*expected),
            "version {} answered {report:?}",
            decided.version
        );
        *seen.entry(decided.version).or_default() += 1;
        if !reported && seen.len() == answers.len() {
            reported = true;
            saw_both.fetch_add(1, Ordering::Relaxed);
        }
    }
    seen
}

#[test]
fn decisions_always_match_the_version_they_report_across_a_thousand_swaps() {
    let fast = Arc::new(compiled("fast"));
    let slow = Arc::new(compiled("slow"));
    let answers = HashMap::from([(*fast.version(), 100), (*slow.version(), 200)]);
    assert_eq!(answers.len(), 2, "the two fixtures must differ");
    let handle = PolicyHandle::new(compiled("fast"));
    let stop = AtomicBool::new(false);
    let saw_both = AtomicUsize::new(0);
    let (swaps, per_thread) = std::thread::scope(|s| {
        let deciders: Vec<_> = (0..DECIDERS)
            .map(|_| s.spawn(|| decide_until(&handle, &answers, &stop, &saw_both)))
            .collect();
        // Swap at least a thousand times, and on until every decider has seen both sets
        // (a busy machine may not schedule a decider at once), within a generous bound.
        let started = Instant::now();
        let mut swaps = 0;
        while swaps < MIN_SWAPS
            || (saw_both.load(Ordering::Relaxed) < DECIDERS
                && started.elapsed() < Duration::from_secs(30))
        {
            let next = if swaps % 2 == 0 { &slow } else { &fast };
            handle.swap(Arc::clone(next));
            swaps += 1;
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        let per_thread: Vec<_> = deciders.into_iter().map(|d| d.join().unwrap()).collect();
        (swaps, per_thread)
    });
    assert!(swaps >= MIN_SWAPS);
    for seen in &per_thread {
        assert_eq!(seen.len(), 2, "each decider saw both sets: {seen:?}");
    }
}

#[test]
fn decisions_stay_whole_while_the_pipeline_pushes() {
    let dir = rules_dir_with("fast");
    let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    let answers = HashMap::from([
        (version_of_fixture("fast"), 100),
        (version_of_fixture("slow"), 200),
    ]);
    let stop = AtomicBool::new(false);
    let saw_both = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let deciders: Vec<_> = (0..2)
            .map(|_| s.spawn(|| decide_until(reloader.handle(), &answers, &stop, &saw_both)))
            .collect();
        for i in 0..40 {
            let name = if i % 2 == 0 { "slow" } else { "fast" };
            let pushed = reloader.push(files_of(name), None, Source::Push).unwrap();
            assert!(pushed.changed);
        }
        stop.store(true, Ordering::Relaxed);
        for d in deciders {
            d.join().unwrap();
        }
    });
    assert_eq!(payment_delay_ms(&reloader), Some(100));
}
