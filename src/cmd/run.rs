//! `rebound run`: the main job. Runs the bundled order pipeline on the rules (reloaded live
//! when a rule file changes) until every message has its fate, or until Ctrl-C / SIGTERM, and
//! prints the report. This module checks the flags; the wiring is `rebound::app`'s, with
//! [`app::Options::run`]'s defaults.

use crate::Outcome;
use rebound::app::{self, AdminListen, TokenFrom};
use rebound_runtime::policy::TimeScale;
use std::path::PathBuf;
use std::time::Duration;

/// Run the bundled order pipeline to the end and report.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    rebound run                                   # 50,000 orders at 100× speed, then the report\n  \
    rebound run --messages 20000 --data /tmp/r20k --json   # a run of its own, one JSON document on stdout\n  \
    rebound run --data /tmp/r --time-scale 1000   # killed or stopped? run it again to finish\n\n\
    The run lives in --data: stopped (Ctrl-C, SIGTERM) or killed (even kill -9), the same\n\
    command continues it, and the report covers every message. Run again once finished, it\n\
    prints the same report.")]
pub struct Args {
    /// The rule set directory (watched: an edited rule changes the decisions that follow).
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// How many orders the run has.
    #[arg(long, default_value_t = 50_000)]
    messages: u64,
    /// The data directory (the embedded SQLite store and the pipeline's orders).
    #[arg(long, default_value = "rebound-data")]
    data: PathBuf,
    /// The rules' delays and the message timeout run this many times faster.
    #[arg(long, default_value_t = 100.0)]
    time_scale: f64,
    /// Also serve the admin API on this address, e.g. 127.0.0.1:8080 (a non-loopback address
    /// needs $REBOUND_ADMIN_TOKEN).
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,
    /// Print the report as one JSON document.
    #[arg(long)]
    json: bool,
    /// How long a store that refuses every write (a full disk, a read-only file) is retried
    /// before the run stops with the cause (exit 2).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = super::duration)]
    store_give_up: Duration,
    /// How log lines are written on stderr: `text`, or `json` (one JSON object per line).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    log_format: app::LogFormat,
    #[command(flatten)]
    store: super::store::StoreArgs,
}

pub fn run(args: Args) -> Outcome {
    let scale = match TimeScale::new(args.time_scale) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: --time-scale: {e}");
            return Outcome::Trouble;
        }
    };
    if args.messages == 0 {
        eprintln!("error: --messages must be at least 1");
        return Outcome::Trouble;
    }
    let admin = match &args.admin {
        None => None,
        Some(addr) => match AdminListen::check(addr, TokenFrom::Env) {
            Ok(a) => Some(a),
            Err(outcome) => return outcome,
        },
    };
    let fleet = match args.store.fleet() {
        Ok(f) => f,
        Err(outcome) => return outcome,
    };
    let (set, _) = match super::load_rules(&args.rules, args.json) {
        Ok(loaded) => loaded,
        Err(outcome) => return outcome,
    };
    let mut options = app::Options::run(args.rules, args.data);
    options.messages = Some(args.messages);
    options.time_scale = scale;
    options.store_give_up = args.store_give_up;
    options.fleet = fleet;
    options.admin = admin;
    options.json = args.json;
    options.log_format = args.log_format;
    app::run(options, set)
}
