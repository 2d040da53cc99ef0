//! Property-testing support for retry paths (feature `testing`): proptest strategies for
//! failures drawn from a loaded set, [`simulate_path`], and ready-made property checks.
//!
//! - `simulate.rs`: [`simulate_path`] and the [`Path`] it returns;
//! - `strategies.rs`: [`failures`] and [`failure_contexts`], drawn from a set's
//!   [`vocabulary`];
//! - `checks.rs`: the `check_*` properties, and what a set declares that they check against.
//!
//! A path replays one failure attempt after attempt, deciding exactly as the engine does (the
//! same decision loop, with a seeded RNG), until the decision is a dead letter. The checks
//! return `Result<(), TestCaseError>`, so they compose with `?` inside `proptest!` or a
//! [`TestRunner`](proptest::test_runner::TestRunner):
//!
//! ```
//! use proptest::prelude::*;
//! use proptest::test_runner::TestRunner;
//! use rebound_engine::testing::{check_path, failures, simulate_path};
//! use rebound_engine::{SourceFile, compile};
//! use std::time::Duration;
//!
//! let yaml = "version: 1
//! rules:
//!   - id: db-lock
//!     match: { code: \"DB_LOCK*\" }
//!     retry:
//!       max_retries: 5
//!       max_elapsed: 2m
//!       backoff: { exponential: { base: 1s, max: 30s }, jitter: equal }
//!     dead_letter: L2
//! ";
//! let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
//! let mut runner = TestRunner::default();
//! runner
//!     .run(&(failures(&set), any::<u64>()), |(failure, seed)| {
//!         let path = simulate_path(&set, failure.context(), Duration::from_millis(20), seed);
//!         // terminates within max_retries + 1 attempts, delays within the declared cap,
//!         // retry_after honoured, and it ends in the deciding rule's declared label.
//!         check_path(&set, &path)?;
//!         Ok(())
//!     })
//!     .unwrap();
//! ```

mod checks;
mod simulate;
mod strategies;

pub use checks::{
    check_delays_within_cap, check_ends_in, check_ends_in_declared_label, check_path,
    check_retry_after_honoured, check_terminates, declared_cap, declared_label, max_retries,
    policy_of,
};
pub use simulate::{MAX_PATH_ATTEMPTS, Path, PathEnd, Redriven, Step, simulate_path};
pub use strategies::{Vocabulary, failure_contexts, failures, vocabulary};

/// A failure that owns its names and maps (the engine's [`OwnedFailure`](crate::OwnedFailure)).
pub use crate::context::OwnedFailure as Failure;
