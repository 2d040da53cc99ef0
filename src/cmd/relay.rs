//! `rebound relay`: a broker source, the team's handler behind it, the rules deciding every
//! failure, custody acks to the broker, and the admin API and console, until Ctrl-C or SIGTERM;
//! then a bounded stop and the relay's report (`docs/spec/sources.md`, "`rebound relay`").
//! This module checks the flags and the file's `source:` and `handler:` sections; the wiring is
//! `rebound::app`'s.

use super::duration;
use crate::Outcome;
use rebound::app::{self, AdminListen, JobStore, TokenFrom};
use rebound::config::{ConfigFile, SourceUrl, check_handler_url};
use rebound::relay::publish::Publisher;
use rebound::relay::source::SourceSpec;
use rebound::relay::{Handler, HandlerOptions};
use rebound_runtime::store::SqliteStore;
use rebound_store_redis::stream::FieldNames;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Consume a broker's stream and hand each message to your service's HTTP endpoint, with
/// Rebound's rules deciding every failure.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    rebound relay --source 'redis-stream://127.0.0.1:6379/orders?group=rebound' \\\n    \
    --handler http://127.0.0.1:9000/orders --admin 127.0.0.1:8080\n  \
    rebound relay --source 'nats://127.0.0.1:4222/ORDERS?consumer=rebound' \\\n    \
    --handler https://orders.internal/rebound\n  \
    rebound relay --config /etc/rebound/relay.yaml   # source:, handler: and the rest from the file")]
pub struct Args {
    /// Where the messages are: `redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM?group=G` or
    /// `nats://[USER:PASS@]HOST:PORT/STREAM?consumer=NAME` (or `source.url` in --config).
    #[arg(long, value_name = "URL")]
    source: Option<String>,
    /// Where each delivery is posted: an http:// or https:// URL (or `handler.url` in
    /// --config, with `timeout`, `concurrency` and `ca_file`).
    #[arg(long, value_name = "URL")]
    handler: Option<String>,
    /// A configuration file (YAML; docs/spec/operations.md and sources.md): every key
    /// optional, a flag given here wins over it. Besides serve's keys it takes `source:`
    /// (url, biz, biz_token, fields), `handler:` (url, timeout, concurrency, ca_file) and
    /// `dead_letters:` (publish: a redis-stream:// or nats:// URL each stored dead letter is
    /// also published to).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The rule set directory (watched; pushes are written into it) [default: rules].
    #[arg(long, value_name = "DIR")]
    rules: Option<PathBuf>,
    /// Where the admin API and console listen, e.g. 127.0.0.1:8080 (port 0 picks a free
    /// port; the bound address is printed). A non-loopback address needs a token.
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,
    /// The data directory: the embedded SQLite store (retries, dead letters)
    /// [default: rebound-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// The rules' delays (and the labels' durations) run this many times
    /// faster [default: 1: a relay runs in real time].
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
    /// Messages with the same key (a Redis entry's `key` field, JetStream's `Rebound-Key` or
    /// `Nats-Msg-Id`) are handed to the handler one at a time, in order.
    #[arg(long)]
    ordered: bool,
    /// Print the start-up line and the report as JSON.
    #[arg(long)]
    json: bool,
    /// How long a store that refuses every write is retried before the relay stops with the
    /// cause (exit 2) [default: 30s].
    #[arg(long, value_name = "DUR", value_parser = duration)]
    store_give_up: Option<Duration>,
    /// How log lines are written on stderr: `text`, or `json` (one JSON object per line).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    log_format: app::LogFormat,
    #[command(flatten)]
    store: super::store::StoreArgs,
}

/// Relays until stopped; `Err` is the outcome to exit with when a flag, the configuration
/// file, the rule set or the store refuse it before it starts.
pub fn run(args: Args) -> Result<Outcome, Outcome> {
    let file = super::load_config(args.config.as_deref())?;
    let scale = super::time_scale_of(args.time_scale, &file)?;
    let url = source_url(args.source.as_deref(), &file)?;
    let handler_options = handler_options(args.handler.as_deref(), &file)?;
    let fleet = args.store.fleet(&file)?;
    let mut topology = file
        .topology
        .apply(rebound_runtime::topology::Config::default());
    if args.ordered {
        topology.ordering.ordered = rebound_runtime::topology::Ordered::All;
    }
    if handler_options.timeout >= topology.message_timeout {
        eprintln!(
            "error: handler.timeout ({}) must be below the topology's message_timeout ({}): a tree would time out before its request does",
            humantime::format_duration(handler_options.timeout),
            humantime::format_duration(topology.message_timeout)
        );
        return Err(Outcome::Trouble);
    }
    let handler = Handler::new(&handler_options).map_err(|e| {
        eprintln!("error: --handler: {e}");
        Outcome::Trouble
    })?;
    let admin = match args.admin.or(file.admin.addr.clone()) {
        None => None,
        Some(addr) => {
            let token_file = args.token_file.or(file.admin.token_file.clone());
            Some(
                AdminListen::check(&addr, TokenFrom::FileOrEnv(token_file))?
                    .with_edges(rebound::admin::edges::Edges::from(&file.admin)),
            )
        }
    };
    let (rules, set, data) = super::rules_and_data(args.rules, args.data, args.json, &file)?;
    // On a fleet the node's name is its consumer's name too (each node its own, so the broker
    // divides the stream); alone, the machine's name (the same across restarts).
    let (store, consumer) = match &fleet {
        Some(fleet) => (JobStore::Fleet, fleet.node.clone()),
        None => {
            let store = SqliteStore::open(&data).map_err(|e| {
                eprintln!("error: {e}");
                Outcome::Trouble
            })?;
            (JobStore::Own(Arc::new(store)), args.store.consumer(&file)?)
        }
    };
    let mut source = SourceSpec::new(url, consumer, topology.max_spout_pending);
    source.lease = args.store.lease(&file);
    if let Some(setting) = &file.source {
        if let Some(biz) = &setting.biz {
            source.biz = biz.clone();
        }
        source.biz_token = setting.biz_token;
        if let Some(keep) = setting.fates_keep {
            source.fates_keep = keep;
        }
        let names = FieldNames::default();
        source.fields = FieldNames {
            biz: setting.fields.biz.clone().unwrap_or(names.biz),
            key: setting.fields.key.clone().unwrap_or(names.key),
            payload: setting.fields.payload.clone().unwrap_or(names.payload),
        };
    }
    let mut options = app::Options::embedded(rules);
    options.data = data;
    options.admin = admin;
    options.watch_required = true;
    if let Some(give_up) = args.store_give_up.or(file.store_give_up) {
        options.store_give_up = give_up;
    }
    options.time_scale = scale;
    options.pull = args.rules_url.map(|url| app::Pull {
        url,
        interval: args.rules_poll_interval,
    });
    options.fleet = fleet;
    options.topology = topology.clone();
    options.decisions = file.decisions.apply(options.decisions);
    if let Some(drain) = file.topology.drain {
        options.stop = drain.0;
    }
    options.receivers = file.receivers;
    options.json = args.json;
    options.log_format = args.log_format;
    let publish = file
        .dead_letters
        .publish
        .clone()
        .map(|url| Publisher::new(url, &options.data));
    let job = app::relay::job(source, handler, topology, store, publish);
    let job = job.time_scale(scale);
    Ok(app::run_job(options, set, job))
}

/// `--source`, else the file's `source.url`: one is required.
fn source_url(flag: Option<&str>, file: &ConfigFile) -> Result<SourceUrl, Outcome> {
    if let Some(flag) = flag {
        return SourceUrl::parse(flag).map_err(|e| {
            eprintln!("error: --source: {e}");
            Outcome::Trouble
        });
    }
    match file.source.as_ref().and_then(|s| s.url.clone()) {
        Some(url) => Ok(url),
        None => {
            eprintln!(
                "error: relay needs --source URL (or `source: {{url: URL}}` in --config), e.g. redis-stream://127.0.0.1:6379/orders?group=rebound"
            );
            Err(Outcome::Trouble)
        }
    }
}

/// `--handler`, else the file's `handler.url`, with the file's other handler keys.
fn handler_options(flag: Option<&str>, file: &ConfigFile) -> Result<HandlerOptions, Outcome> {
    let setting = &file.handler;
    let url = match (flag, &setting.url) {
        (Some(flag), _) => check_handler_url(flag).map_err(|e| {
            eprintln!("error: --handler: {e}");
            Outcome::Trouble
        })?,
        (None, Some(url)) => url.clone(),
        (None, None) => {
            eprintln!(
                "error: relay needs --handler URL (or `handler: {{url: URL}}` in --config), e.g. http://127.0.0.1:9000/orders"
            );
            return Err(Outcome::Trouble);
        }
    };
    let defaults = HandlerOptions::default();
    Ok(HandlerOptions {
        url,
        timeout: setting.timeout.unwrap_or(defaults.timeout),
        concurrency: setting.concurrency.unwrap_or(defaults.concurrency),
        ca_file: setting.ca_file.clone(),
    })
}
