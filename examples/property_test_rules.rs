//! Property-test a rule set's retry paths with `rebound_engine::testing`, the way a team
//! would in its own test suite.
//!
//! ```sh
//! cargo run --example property_test_rules            # the shipped rules/
//! cargo run --example property_test_rules -- my-rules 5000
//! ```
//!
//! For failures drawn from the set's own biz types, codes, attributes and signals (plus
//! unknown ones), under random seeds and processing times, every path must terminate within
//! `max_retries + 1` attempts, keep its delays within the declared cap, honour `retry_after`,
//! and end in the label its deciding rule declares. A failure prints the shrunk failure, its
//! seed and the whole path.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rebound_engine::testing::{check_path, failures, simulate_path, vocabulary};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "rules".into());
    let cases: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1_000);
    let set = match rebound_engine::load_dir(std::path::Path::new(&dir)) {
        Ok(Ok(set)) => set,
        Ok(Err(rejected)) => {
            eprintln!("{rejected}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("error: cannot read {dir}: {e}");
            return ExitCode::from(2);
        }
    };
    let vocab = vocabulary(&set);
    println!(
        "{dir} (version {}): {} biz types, {} codes, {} attributes, {} signals",
        set.version(),
        vocab.biz.len(),
        vocab.codes.len(),
        vocab.attrs.len(),
        vocab.signals.len()
    );
    let mut config = Config::with_cases(cases);
    config.failure_persistence = None;
    let mut runner = TestRunner::new(config);
    let strategy = (
        failures(&set),
        any::<u64>(),
        (0u64..=30_000).prop_map(Duration::from_millis),
    );
    let result = runner.run(&strategy, |(failure, seed, processing)| {
        let path = simulate_path(&set, failure.context(), processing, seed);
        check_path(&set, &path)
    });
    match result {
        Ok(()) => {
            println!(
                "{cases} paths: all terminate, stay within their caps, honour retry_after and end in their declared label"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("property failed: {e}");
            ExitCode::from(1)
        }
    }
}
