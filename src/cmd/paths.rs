//! `rebound paths`: the retry path of every rule and of the defaults, as a table.

use crate::Outcome;
use rebound_engine::paths::retry_paths;
use std::path::PathBuf;

/// Show each rule's retry path: retry number, delay range over jitter, cumulative best and
/// worst case, and where it ends (dead-letter label and reason).
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  rebound paths --rules rules\n  \
rebound paths --csv > retry-policy.csv    # for review in a spreadsheet\n\n\
Each rule is shown on its own, deciding every attempt. Guards and script delays are\n\
evaluated on a sample context (biz SAMPLE, code SAMPLE, no attrs or signals).")]
pub struct Args {
    /// The rule set directory.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// Print one JSON document instead of text.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the table as CSV (one row per retry, with the rule id).
    #[arg(long)]
    csv: bool,
}

pub fn run(args: Args) -> Outcome {
    let set = match super::load_rules(&args.rules, args.json) {
        Ok((set, _)) => set,
        Err(outcome) => return outcome,
    };
    let table = retry_paths(&set);
    if args.json {
        println!("{}", serde_json::to_string(&table).unwrap_or_default());
    } else if args.csv {
        print!("{}", table.to_csv());
    } else {
        print!("{table}");
    }
    Outcome::Ok
}
