//! `rebound test`: run the set's rule tests (`tests/*.yaml`), cases and paths.

use crate::Outcome;
use rebound_engine::ruletest::{MIN_SEEDS, RunOptions, load_suite, read_test_files, run_suite};
use std::path::PathBuf;

/// Run the rule set's tests (tests/*.yaml): cases decide once, paths replay a failure until
/// it is dead-lettered; both must hold under every RNG seed tried.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  rebound test --rules rules\n\n\
A failure prints the case or path, its file and line, the seed that shows it and the whole\n\
path; add 'seed: N' to its 'given' to replay it. The last line is 'N passed, M failed'.\n\
Exit status: 0 all passed, 1 a test failed or a rule or test file is invalid, 2 I/O error.")]
pub struct Args {
    /// The rule set directory (its tests are in DIR/tests).
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// RNG seeds each case and path is run under (at least 64).
    #[arg(long, default_value_t = RunOptions::default().seeds,
          value_parser = clap::value_parser!(u32).range(i64::from(MIN_SEEDS)..))]
    seeds: u32,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Outcome {
    let set = match super::load_rules(&args.rules, args.json) {
        Ok((set, _)) => set,
        Err(outcome) => return outcome,
    };
    let files = match read_test_files(&args.rules) {
        Ok(files) => files,
        Err(e) => {
            eprintln!(
                "error: cannot read the tests of {}: {e}",
                args.rules.display()
            );
            return Outcome::Trouble;
        }
    };
    let suite = match load_suite(&set, &files) {
        Ok(suite) => suite,
        Err(diags) => {
            crate::diagnostics::print(&diags, &files);
            let n = diags.iter().filter(|d| d.is_error()).count();
            eprintln!("{n} error(s) in the test files: no test was run");
            if args.json {
                println!("{}", serde_json::json!({ "errors": diags }));
            }
            return Outcome::Wrong;
        }
    };
    if suite.tests.is_empty() {
        eprintln!(
            "note: no tests found in {}",
            args.rules.join("tests").display()
        );
    }
    let report = run_suite(
        &set,
        &suite,
        RunOptions {
            seeds: args.seeds,
            rules: Some(args.rules.display().to_string()),
        },
    );
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        print!("{report}");
    }
    if report.ok() {
        Outcome::Ok
    } else {
        Outcome::Wrong
    }
}
