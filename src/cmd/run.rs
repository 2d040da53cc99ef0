//! `rebound run`: the main job. Runs the bundled order pipeline on the rules (reloaded live
//! when a rule file changes) until every message has its fate, or until Ctrl-C / SIGTERM, and
//! prints the report. This module checks the flags; the wiring is `rebound::app`'s, with
//! [`app::Options::run`]'s defaults.

use crate::Outcome;
use rebound::app::{self, AdminListen, TokenFrom};
use std::path::PathBuf;
use std::time::Duration;

/// Run the bundled order pipeline to the end and report.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    rebound run                                   # 50,000 orders at 100× speed, then the report\n  \
    rebound run --messages 20000 --data /tmp/r20k --json   # a run of its own, one JSON document on stdout\n  \
    rebound run --data /tmp/r --time-scale 1000   # killed or stopped? run it again to finish\n  \
    rebound run --config rebound.yaml --messages 1000   # the file's keys; a flag wins over its key\n  \
    rebound run --ordered --messages 20000 --json   # events of one order never overtake each other\n  \
    rebound run --fresh --messages 1000   # start over in --data: the run it holds is removed\n\n\
    The run lives in --data: stopped (Ctrl-C, SIGTERM) or killed (even kill -9), the same\n\
    command continues it, and the report covers every message. Run again once finished, it\n\
    prints the same report. A different run is refused there (exit 2), naming a --data of its\n\
    own; --fresh starts it in the same directory instead.")]
pub struct Args {
    /// A configuration file (YAML; docs/spec/operations.md): every key optional, and a flag
    /// given here wins over it. Besides the flags' keys (rules, data, store, namespace, node,
    /// lease, store_check, store_give_up, time_scale, messages, admin.addr,
    /// admin.token_file) it sets the topology (message_timeout, max_spout_pending, ackers,
    /// retry_mix, fuse, channel_capacity, batch_size, spout_idle_wait, ordered, on_dead_letter,
    /// max_held) and the alert receivers. Relative paths in it are relative to the working
    /// directory.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The rule set directory (watched: an edited rule changes the decisions that follow)
    /// [default: rules].
    #[arg(long, value_name = "DIR")]
    rules: Option<PathBuf>,
    /// How many orders the run has (with --keyed: how many events) [default: 50000].
    #[arg(long, value_name = "N")]
    messages: Option<u64>,
    /// Each order has one to three events with the order id as their key (created, paid,
    /// shipped); the store checks their sequence and the report counts `out_of_order`, the
    /// events that reached it before an earlier event of their order. Retries reorder them.
    #[arg(long)]
    keyed: bool,
    /// Keep each order's events in order through retries (ordering on for every biz, as
    /// `topology.ordered: all`): a later event waits while an earlier one is in flight or
    /// waits for its retry. Implies --keyed.
    #[arg(long)]
    ordered: bool,
    /// The data directory (the embedded SQLite store and the pipeline's orders)
    /// [default: rebound-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Start over in --data: the run it holds (finished or not) is removed first, under its
    /// lock, and this one starts in its place. Only Rebound's own files go (rebound.db and
    /// pipeline.db with their SQLite companions); nothing else in the directory is touched.
    /// Not with a shared store (--store redis://…): pass another --namespace there.
    #[arg(long)]
    fresh: bool,
    /// The rules' delays and the message timeout run this many times faster [default: 100].
    #[arg(long, value_name = "F")]
    time_scale: Option<f64>,
    /// Also serve the admin API on this address, e.g. 127.0.0.1:8080 (a non-loopback address
    /// needs a token).
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,
    /// A file holding the admin token that writes need (else $REBOUND_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the report as one JSON document.
    #[arg(long)]
    json: bool,
    /// How long a store that refuses every write (a full disk, a read-only file) is retried
    /// before the run stops with the cause (exit 2) [default: 30s].
    #[arg(long, value_name = "DUR", value_parser = super::duration)]
    store_give_up: Option<Duration>,
    /// How log lines are written on stderr: `text`, or `json` (one JSON object per line).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    log_format: app::LogFormat,
    /// A correlated outage: 2 s (rules' time) into the run, the payment gateway answers
    /// nothing for this long (rules' time, so --time-scale shortens it): every PAYMENT write
    /// fails with NET_TIMEOUT from downstream payment-gateway. The report shows what the
    /// breakers and budgets did.
    #[arg(long, value_name = "DUR", value_parser = super::duration)]
    outage: Option<Duration>,
    #[command(flatten)]
    store: super::store::StoreArgs,
}

/// Runs the job and prints its report; `Err` is the outcome to exit with when a flag, the
/// configuration file or the rule set refuse it before it starts.
pub fn run(args: Args) -> Result<Outcome, Outcome> {
    let file = super::load_config(args.config.as_deref())?;
    let scale = super::time_scale(args.time_scale.or(file.time_scale).unwrap_or(100.0))?;
    let messages = args.messages.or(file.messages).unwrap_or(50_000);
    if messages == 0 {
        eprintln!("error: --messages must be at least 1");
        return Err(Outcome::Trouble);
    }
    let token_file = args.token_file.or(file.admin.token_file.clone());
    let admin = match args.admin.as_ref().or(file.admin.addr.as_ref()) {
        None => None,
        Some(addr) => Some(
            AdminListen::check(addr, TokenFrom::FileOrEnv(token_file))?
                .with_edges(rebound::admin::edges::Edges::from(&file.admin)),
        ),
    };
    let fleet = args.store.fleet(&file)?;
    if args.fresh && fleet.is_some() {
        eprintln!(
            "error: --fresh starts over in a data directory, and a run on a shared store lives in \
             its namespace, which other nodes may share: pass another --namespace for a new run"
        );
        return Err(Outcome::Trouble);
    }
    let (rules, set, data) = super::rules_and_data(args.rules, args.data, args.json, &file)?;
    let mut options = app::Options::run(rules, data);
    options.messages = Some(messages);
    options.time_scale = scale;
    options.outage = args.outage.map(rebound::pipeline::faults::Outage::of);
    options.fresh = args.fresh;
    if let Some(give_up) = args.store_give_up.or(file.store_give_up) {
        options.store_give_up = give_up;
    }
    options.fleet = fleet;
    options.admin = admin;
    options.topology = file.topology.apply(options.topology);
    options.decisions = file.decisions.apply(options.decisions);
    if let Some(drain) = file.topology.drain {
        options.stop = drain.0;
    }
    options.keyed = args.keyed || args.ordered;
    if args.ordered {
        options.topology.ordering.ordered = rebound_runtime::topology::Ordered::All;
    }
    options.receivers = file.receivers;
    options.json = args.json;
    options.log_format = args.log_format;
    Ok(app::run(options, set))
}
