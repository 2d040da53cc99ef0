//! `rebound run`: the main job, the bundled order-pipeline topology.

use crate::Outcome;
use std::path::PathBuf;

/// Run the bundled order-pipeline topology.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  rebound run --messages 50000 --json")]
pub struct Args {
    /// The rule set directory.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// How many messages the order spout generates.
    #[arg(long, default_value_t = 50_000)]
    messages: u64,
    /// The data directory (embedded SQLite store).
    #[arg(long, default_value = "rebound-data")]
    data: PathBuf,
    /// Delays and timeouts run this many times faster.
    #[arg(long, default_value_t = 100.0)]
    time_scale: f64,
    /// Also serve the admin API on this address.
    #[arg(long)]
    admin: Option<String>,
    /// Print one JSON report at the end.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Outcome {
    let _ = (
        &args.rules,
        args.messages,
        &args.data,
        args.time_scale,
        &args.admin,
        args.json,
    );
    eprintln!(
        "rebound run: the runtime is not built yet. Meanwhile, ask the rules directly:\n  \
         cargo run --release -- decide --biz PAYMENT --code PAY_PROCESSING --attempt 1"
    );
    Outcome::Ok
}
