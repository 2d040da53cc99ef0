//! Property tests of the shipped rules/ with `rebound_engine::testing`: for failures drawn
//! from the set's own vocabulary (and unknown ones), under any seed.

use proptest::prelude::*;
use rebound_engine::CompiledSet;
use rebound_engine::testing::{
    check_delays_within_cap, check_ends_in, check_ends_in_declared_label,
    check_retry_after_honoured, check_terminates, failure_contexts, failures, simulate_path,
};
use std::sync::LazyLock;
use std::time::Duration;

static SET: LazyLock<CompiledSet> = LazyLock::new(|| {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    rebound_engine::load_dir(&dir).unwrap().unwrap()
});

fn processing() -> impl Strategy<Value = Duration> {
    (0u64..=60_000).prop_map(Duration::from_millis)
}

proptest! {
    #[test]
    fn every_shipped_path_terminates_within_max_retries_plus_one(
        f in failures(&SET), seed in any::<u64>(), p in processing()
    ) {
        check_terminates(&SET, &simulate_path(&SET, f.context(), p, seed))?;
    }

    #[test]
    fn shipped_delays_are_non_negative_and_within_the_declared_cap(
        f in failures(&SET), seed in any::<u64>(), p in processing()
    ) {
        check_delays_within_cap(&SET, &simulate_path(&SET, f.context(), p, seed))?;
    }

    #[test]
    fn shipped_rules_honour_retry_after(
        f in failures(&SET), seed in any::<u64>(), asked in 0u64..=120_000
    ) {
        let f = rebound_engine::testing::Failure {
            retry_after: Some(Duration::from_millis(asked)),
            ..f
        };
        check_retry_after_honoured(&SET, &simulate_path(&SET, f.context(), Duration::ZERO, seed))?;
    }

    #[test]
    fn shipped_paths_end_in_the_declared_label(
        f in failures(&SET), seed in any::<u64>(), p in processing()
    ) {
        check_ends_in_declared_label(&SET, &simulate_path(&SET, f.context(), p, seed))?;
    }

    #[test]
    fn poison_always_ends_in_l3(code in prop::sample::select(vec!["BAD_JSON", "VALIDATION_FAILED", "PANIC"]),
                                biz in "[A-Z]{0,8}", seed in any::<u64>()) {
        let ctx = rebound_engine::FailureContext::new(&biz, code, 1);
        check_ends_in(&simulate_path(&SET, ctx, Duration::ZERO, seed), "L3")?;
    }

    #[test]
    fn a_decision_anywhere_on_a_path_keeps_the_properties(
        f in failure_contexts(&SET), seed in any::<u64>()
    ) {
        let path = simulate_path(&SET, f.context(), Duration::ZERO, seed);
        check_delays_within_cap(&SET, &path)?;
        check_retry_after_honoured(&SET, &path)?;
        check_ends_in_declared_label(&SET, &path)?;
        prop_assert!(path.end().is_some());
    }
}
