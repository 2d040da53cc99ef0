//! Rule tests: the runner behind `rebound test`, built on the same decision loop the engine
//! uses (`docs/spec/rules.md`, "Rule tests").
//!
//! - `model.rs`: what a test file says (serde types; the source of the JSON Schema).
//! - `read_test_files` / `load_suite`: `tests/*.yaml` → a validated `Suite`, with
//!   file:line:col diagnostics like rule files (feature `testing`).
//! - `load_suite_each`: the same, file by file: a broken file is reported and the others run.
//! - `run_suite`: each case and path under many seeds, searched with proptest
//!   (feature `testing`), optionally filtered by name.
//! - `coverage.rs`: which rules and outcomes (retry, each dead-letter reason) the tests
//!   exercised.
//!
//! ```
//! # #[cfg(feature = "testing")] {
//! use rebound_engine::ruletest::{RunOptions, load_suite, run_suite};
//! use rebound_engine::{SourceFile, compile};
//!
//! let rules = "version: 1\nrules:\n  - id: fast\n    match: { code: PAY_PROCESSING }\n    retry: { max_retries: 3, backoff: { fixed: 100ms } }\n    dead_letter: L1\n";
//! let tests = "version: 1
//! cases:
//!   - name: retried fast
//!     given: { code: PAY_PROCESSING }
//!     expect: { action: retry, delay: 100ms, rule: fast }
//! paths:
//!   - name: ends in L1
//!     given: { code: PAY_PROCESSING }
//!     expect: { retries: 3, dead_letter: L1, total_delay_at_most: 1s }
//! ";
//! let set = compile(vec![SourceFile::new("r.yaml", "r.yaml", rules)]).unwrap();
//! let suite = load_suite(&set, &[SourceFile::new("t.yaml", "tests/t.yaml", tests)]).unwrap();
//! let report = run_suite(&set, &suite, RunOptions::default());
//! assert_eq!((report.passed, report.failed), (2, 0));
//! assert!(report.to_string().ends_with("2 passed, 0 failed\n"));
//! # }
//! ```

#[cfg(feature = "testing")]
mod coverage;
pub(crate) mod model;
#[cfg(feature = "testing")]
mod run;
#[cfg(feature = "testing")]
mod suite;

#[cfg(feature = "testing")]
pub use coverage::{Coverage, Outcome, RuleCoverage};
#[cfg(feature = "testing")]
pub use run::{
    BrokenFileReport, Exercised, Failure, MIN_SEEDS, Report, RunOptions, StepReport, TestResult,
    run_suite,
};
#[cfg(feature = "testing")]
pub use suite::{
    Action, BrokenFile, CaseExpect, CaseTest, DEFAULT_NOW, Given, PathExpect, PathTest, RuleTest,
    Suite, TestKind, load_suite, load_suite_each, read_test_files,
};
