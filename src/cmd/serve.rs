//! `rebound serve`: the bundled order-pipeline topology with the admin API, the
//! rules-directory watcher and, with `--rules-url`, the config-center pull client, until
//! Ctrl-C or SIGTERM, then a graceful stop. This module checks the flags; the wiring is
//! `rebound::app`'s, with [`app::Options::serve`]'s defaults.

use super::duration;
use crate::Outcome;
use rebound::app::{self, AdminListen, TokenFrom};
use std::path::PathBuf;
use std::time::Duration;

/// Serve the admin API and reload the rules live, until Ctrl-C or SIGTERM.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    rebound serve --rules rules --admin 127.0.0.1:8080\n  \
    REBOUND_ADMIN_TOKEN=s3cret rebound serve --admin 0.0.0.0:8080 \\\n    \
    --rules-url http://config-center.internal/rebound/rules.json\n  \
    rebound serve --config /etc/rebound/config.yaml   # admin.addr and the rest from the file")]
pub struct Args {
    /// A configuration file (YAML; docs/spec/operations.md): every key optional, and a flag
    /// given here wins over it. Besides the flags' keys (rules, data, store, namespace, node,
    /// lease, store_check, store_give_up, time_scale, rate, admin.addr, admin.token_file) it
    /// sets the topology (message_timeout, max_spout_pending, ackers, retry_mix, fuse,
    /// channel_capacity, batch_size, spout_idle_wait) and the alert receivers. Relative
    /// paths in it are relative to the working directory.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The rule set directory (watched; pushes are written into it) [default: rules].
    #[arg(long, value_name = "DIR")]
    rules: Option<PathBuf>,
    /// Where the admin API listens, e.g. 127.0.0.1:8080 (port 0 picks a free port; the
    /// bound address is printed). A non-loopback address needs a token. Required, here or as
    /// `admin.addr` in --config.
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,
    /// The data directory: the embedded SQLite store (dead letters, scheduled retries)
    /// [default: rebound-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// New orders per second the bundled order pipeline generates [default: 20].
    #[arg(long, value_name = "N")]
    rate: Option<f64>,
    /// Delays and timeouts of the bundled topology run this many times faster [default: 1].
    #[arg(long, value_name = "F")]
    time_scale: Option<f64>,
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
    /// before serve stops with the cause (exit 2) [default: 30s].
    #[arg(long, value_name = "DUR", value_parser = duration)]
    store_give_up: Option<Duration>,
    /// How log lines are written on stderr: `text`, or `json` (one JSON object per line).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    log_format: app::LogFormat,
    #[command(flatten)]
    store: super::store::StoreArgs,
}

/// Serves until stopped; `Err` is the outcome to exit with when a flag, the configuration file
/// or the rule set refuse it before it starts.
pub fn run(args: Args) -> Result<Outcome, Outcome> {
    let file = super::load_config(args.config.as_deref())?;
    let scale = super::time_scale_of(args.time_scale, &file)?;
    let Some(addr) = args.admin.or(file.admin.addr.clone()) else {
        eprintln!("error: serve needs --admin ADDR (or `admin: {{addr: ADDR}}` in --config)");
        return Err(Outcome::Trouble);
    };
    let token_file = args.token_file.or(file.admin.token_file.clone());
    let admin = AdminListen::check(&addr, TokenFrom::FileOrEnv(token_file))?
        .with_edges(rebound::admin::edges::Edges::from(&file.admin));
    let fleet = args.store.fleet(&file)?;
    let (rules, set, data) = super::rules_and_data(args.rules, args.data, args.json, &file)?;
    let mut options = app::Options::serve(rules, data, admin);
    options.rate = Some(args.rate.or(file.rate).unwrap_or(20.0));
    options.time_scale = scale;
    if let Some(give_up) = args.store_give_up.or(file.store_give_up) {
        options.store_give_up = give_up;
    }
    options.fleet = fleet;
    options.pull = args.rules_url.map(|url| app::Pull {
        url,
        interval: args.rules_poll_interval,
    });
    options.topology = file.topology.apply(options.topology);
    options.decisions = file.decisions.apply(options.decisions);
    if let Some(drain) = file.topology.drain {
        options.stop = drain.0;
    }
    options.receivers = file.receivers;
    options.json = args.json;
    options.log_format = args.log_format;
    Ok(app::run(options, set))
}
