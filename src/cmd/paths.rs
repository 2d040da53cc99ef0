//! `rebound paths`: the retry path of every rule and of the defaults, as a table, and with
//! `--svg DIR` as one chart per path.

use crate::Outcome;
use rebound_engine::paths::{PathTable, retry_paths};
use std::path::{Path, PathBuf};

/// Show each rule's retry path: retry number, delay range over jitter, cumulative best and
/// worst case, and where it ends (dead-letter label and reason).
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  rebound paths --rules rules\n  \
rebound paths --csv > retry-policy.csv    # for review in a spreadsheet\n  \
rebound paths --svg charts                # charts/RULE_ID.svg and charts/defaults.svg\n\n\
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
    /// Also write each path as a chart, DIR/RULE_ID.svg and DIR/defaults.svg (DIR is
    /// created if needed).
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
}

pub fn run(args: Args) -> Outcome {
    let set = match super::load_rules(&args.rules, args.json) {
        Ok((set, _)) => set,
        Err(outcome) => return outcome,
    };
    let table = retry_paths(&set);
    if let Some(dir) = &args.svg {
        match write_charts(&table, dir) {
            Ok(n) => eprintln!("wrote {n} charts into {}", dir.display()),
            Err(e) => {
                eprintln!("error: {e}");
                return Outcome::Trouble;
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string(&table).unwrap_or_default());
    } else if args.csv {
        print!("{}", table.to_csv());
    } else {
        print!("{table}");
    }
    Outcome::Ok
}

/// Writes one chart per path into `dir`, named by its rule id (ids are plain file names:
/// `[a-z0-9][a-z0-9._-]*`, and `defaults` is reserved for the defaults). Returns how many.
fn write_charts(table: &PathTable, dir: &Path) -> Result<usize, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the chart directory {}: {e}", dir.display()))?;
    for path in &table.paths {
        let file = dir.join(format!("{}.svg", path.rule));
        std::fs::write(&file, path.to_svg())
            .map_err(|e| format!("cannot write the chart {}: {e}", file.display()))?;
    }
    Ok(table.paths.len())
}
