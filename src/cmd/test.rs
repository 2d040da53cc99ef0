//! `rebound test`: run the set's rule tests (`tests/*.yaml`), cases and paths.

use crate::Outcome;
use rebound_engine::ruletest::{
    MIN_SEEDS, RunOptions, load_suite_each, read_test_files, run_suite,
};
use std::path::PathBuf;

/// Run the rule set's tests (tests/*.yaml): cases decide once, paths replay a failure until
/// it is dead-lettered; both must hold under every RNG seed tried.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  rebound test --rules rules\n  \
rebound test --rules rules -v --filter payment --coverage\n\n\
A failure prints the case or path, its file and line, the seed that shows it and the whole\n\
path; add 'seed: N' to its 'given' to replay it. A test file that does not load is reported\n\
as one failure (FILE:LINE:COL) and the other files still run. The last line is\n\
'N passed, M failed'. A --filter that matches no test is an error (\"no test matches\").\n\
Exit status: 0 all passed, 1 a test failed, a rule or test file is invalid or --filter matched\n\
nothing, 2 I/O error.")]
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
    /// Print every case and path with its result and the rules and outcomes it exercised.
    #[arg(short, long)]
    verbose: bool,
    /// Run only the cases and paths whose name contains NAME (case-sensitive).
    #[arg(long, value_name = "NAME")]
    filter: Option<String>,
    /// Show which rules and outcomes (retry, each dead-letter reason) the tests exercised,
    /// and which they never did (with --json: a "coverage" key).
    #[arg(long)]
    coverage: bool,
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
    // A broken file is reported (its diagnostics here, one failure in the report); the
    // tests of the other files still run.
    let suite = load_suite_each(&set, &files);
    for broken in &suite.broken {
        crate::diagnostics::print(&broken.diagnostics, &files);
        eprintln!(
            "{} error(s) in {}: none of its tests was run",
            broken.diagnostics.len(),
            broken.file
        );
    }
    if suite.tests.is_empty() && suite.broken.is_empty() {
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
            filter: args.filter.clone(),
            coverage: args.coverage,
        },
    );
    // A filter that keeps nothing tested nothing: that is not a pass (a typo would hide).
    let unmatched = args.filter.as_deref().filter(|_| report.results.is_empty());
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        print!("{}", report.render(args.verbose));
    }
    if let Some(filter) = unmatched {
        eprintln!(
            "error: no test matches --filter {filter:?} ({} case(s) and path(s) in {})",
            report.filtered_out,
            args.rules.join("tests").display()
        );
        return Outcome::Wrong;
    }
    if report.ok() {
        Outcome::Ok
    } else {
        Outcome::Wrong
    }
}
