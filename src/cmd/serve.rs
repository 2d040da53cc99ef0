//! `rebound serve`: the bundled order-pipeline topology with the admin API, the
//! rules-directory watcher and, with `--rules-url`, the config-center pull client, until
//! Ctrl-C or SIGTERM, then a graceful stop. This module checks the flags; the wiring is
//! `rebound::app`'s, with [`app::Options::serve`]'s defaults.

use super::duration;
use crate::Outcome;
use rebound::app::{self, AdminListen, TokenFrom};
use rebound_runtime::policy::TimeScale;
use std::path::PathBuf;
use std::time::Duration;

/// Serve the admin API and reload the rules live, until Ctrl-C or SIGTERM.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    rebound serve --rules rules --admin 127.0.0.1:8080\n  \
    REBOUND_ADMIN_TOKEN=s3cret rebound serve --admin 0.0.0.0:8080 \\\n    \
    --rules-url http://config-center.internal/rebound/rules.json")]
pub struct Args {
    /// The rule set directory (watched; pushes are written into it).
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// Where the admin API listens, e.g. 127.0.0.1:8080 (port 0 picks a free port; the
    /// bound address is printed). A non-loopback address needs a token.
    #[arg(long, value_name = "ADDR")]
    admin: String,
    /// The data directory: the embedded SQLite store (dead letters, scheduled retries).
    #[arg(long, default_value = "rebound-data")]
    data: PathBuf,
    /// New orders per second the bundled order pipeline generates.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// Delays and timeouts of the bundled topology run this many times faster.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Pull rule sets from this http:// URL ({"files": {...}}, with ETag/If-None-Match).
    #[arg(long, value_name = "URL")]
    rules_url: Option<String>,
    /// Time between polls of --rules-url when the server answers at once.
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = duration)]
    rules_poll_interval: Duration,
    /// A file holding the admin token that writes need (else $REBOUND_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the start-up line as one JSON document, `{"listening": ADDR, "version": …}`
    /// (and an invalid set's diagnostics as `{"errors": […]}`).
    #[arg(long)]
    json: bool,
    /// How long a store that refuses every write (a full disk, a read-only file) is retried
    /// before serve stops with the cause (exit 2).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = duration)]
    store_give_up: Duration,
    /// How log lines are written on stderr: `text`, or `json` (one JSON object per line).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    log_format: app::LogFormat,
    #[command(flatten)]
    store: super::store::StoreArgs,
}

pub fn run(args: Args) -> Outcome {
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        eprintln!(
            "error: --time-scale must be a positive number, got {}",
            args.time_scale
        );
        return Outcome::Trouble;
    }
    let scale = match TimeScale::new(args.time_scale) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: --time-scale: {e}");
            return Outcome::Trouble;
        }
    };
    let admin = match AdminListen::check(&args.admin, TokenFrom::FileOrEnv(args.token_file)) {
        Ok(a) => a,
        Err(outcome) => return outcome,
    };
    let fleet = match args.store.fleet() {
        Ok(f) => f,
        Err(outcome) => return outcome,
    };
    let (set, _) = match super::load_rules(&args.rules, args.json) {
        Ok(loaded) => loaded,
        Err(outcome) => return outcome,
    };
    let mut options = app::Options::serve(args.rules, args.data, admin);
    options.rate = Some(args.rate);
    options.time_scale = scale;
    options.store_give_up = args.store_give_up;
    options.fleet = fleet;
    options.pull = args.rules_url.map(|url| app::Pull {
        url,
        interval: args.rules_poll_interval,
    });
    options.json = args.json;
    options.log_format = args.log_format;
    app::run(options, set)
}
