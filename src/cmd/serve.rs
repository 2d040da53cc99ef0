//! `rebound serve`: the bundled order-pipeline topology with the admin API, the
//! rules-directory watcher and, with `--rules-url`, the config-center pull client, until
//! Ctrl-C or SIGTERM, then a graceful stop.

use super::duration;
use super::lifecycle::{self, Ending, Signals};
use crate::Outcome;
use rebound::admin::auth::{TOKEN_ENV, Token};
use rebound::admin::{self, AdminState};
use rebound::metrics::Metrics;
use rebound::pipeline::{self, PipelineOptions};
use rebound_engine::reload::pull::{PullOptions, Puller};
use rebound_engine::reload::{Reloader, WatchOptions, Watcher};
use rebound_runtime::policy::TimeScale;
use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
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
}

pub fn run(args: Args) -> Outcome {
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        eprintln!(
            "error: --time-scale must be a positive number, got {}",
            args.time_scale
        );
        return Outcome::Trouble;
    }
    let token = match Token::configured(args.token_file.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Outcome::Trouble;
        }
    };
    if let Some(exposed) = args
        .token_file
        .as_deref()
        .and_then(Token::readable_by_others)
    {
        eprintln!("warning: {exposed}");
    }
    let addrs: Vec<SocketAddr> = match args.admin.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => {
            eprintln!(
                "error: --admin {}: not an address (expected HOST:PORT, e.g. 127.0.0.1:8080): {e}",
                args.admin
            );
            return Outcome::Trouble;
        }
    };
    if token.is_none() && !addrs.iter().all(admin::is_loopback) {
        eprintln!(
            "error: refusing to serve the admin API on {} without a token: it is not a \
             loopback address. Set --token-file FILE or {TOKEN_ENV}, or listen on 127.0.0.1.",
            args.admin
        );
        return Outcome::Trouble;
    }
    init_logging();

    let (set, _) = match super::load_rules(&args.rules, args.json) {
        Ok(loaded) => loaded,
        Err(outcome) => return outcome,
    };
    let (reloader, metrics) = super::live_rules(&args.rules, set);

    let runtime = match super::async_runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Outcome::Trouble;
        }
    };
    let outcome = runtime.block_on(serve(args, addrs, token, reloader, metrics));
    // Whatever is still running (a blocking write on a store that hangs) is not waited for.
    runtime.shutdown_timeout(super::RUNTIME_SHUTDOWN);
    outcome
}

async fn serve(
    args: Args,
    addrs: Vec<SocketAddr>,
    token: Option<Token>,
    reloader: Arc<Reloader>,
    metrics: Arc<Metrics>,
) -> Outcome {
    let listener = match tokio::net::TcpListener::bind(addrs.as_slice()).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", args.admin);
            return Outcome::Trouble;
        }
    };
    let bound = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", args.admin);
            return Outcome::Trouble;
        }
    };
    let watcher = match Watcher::spawn(Arc::clone(&reloader), WatchOptions::default()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cannot watch {}: {e}", args.rules.display());
            return Outcome::Trouble;
        }
    };
    let puller = match &args.rules_url {
        None => None,
        Some(url) => {
            let options = PullOptions {
                interval: args.rules_poll_interval,
                ..PullOptions::default()
            };
            match Puller::spawn(Arc::clone(&reloader), url, options) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("error: --rules-url: {e}");
                    return Outcome::Trouble;
                }
            }
        }
    };
    // The topology (and its store) starts only once everything else is in place: a failed
    // start leaves no data behind.
    let scale = match TimeScale::new(args.time_scale) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: --time-scale: {e}");
            return Outcome::Trouble;
        }
    };
    let mut options = PipelineOptions::new(Arc::clone(reloader.handle()), &args.data);
    options.messages = None;
    options.time_scale = scale;
    options.rate = Some(args.rate);
    options.store_give_up = args.store_give_up;
    let running = match pipeline::start(options).await {
        Ok(p) => p,
        Err(e @ pipeline::PipelineError::Lock(_)) => {
            eprintln!("error: {e}");
            return Outcome::Trouble;
        }
        Err(e) => {
            eprintln!("error: cannot start the bundled topology: {e}");
            return Outcome::Trouble;
        }
    };
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot install the signal handlers: {e}");
            return Outcome::Trouble;
        }
    };
    // The one line on stdout: tests and scripts read the port from it.
    if args.json {
        let doc = serde_json::json!({
            "listening": bound.to_string(),
            "version": reloader.handle().current().version().to_string(),
        });
        println!("{doc}");
    } else {
        println!("listening on {bound}");
    }
    let _ = std::io::stdout().flush();
    tracing::info!(
        admin = %bound,
        rules = %args.rules.display(),
        version = %reloader.handle().current().version(),
        token = token.is_some(),
        "serving"
    );

    let state = AdminState {
        reloader,
        metrics,
        token,
        dead_letters: None, // serve_admin makes the running pipeline the desk
    };
    let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut admin = tokio::spawn(pipeline::serve_admin(
        listener,
        state,
        running.handle(),
        async {
            let _ = admin_stopped.await;
        },
    ));
    let handle = running.handle();
    let ending = tokio::select! {
        ending = lifecycle::interrupted_or_failed(&mut signals, &handle) => ending,
        served = &mut admin => {
            let e = admin_result(served).err().unwrap_or_else(|| "it stopped".into());
            eprintln!("error: the admin API failed: {e}");
            return Outcome::Trouble;
        }
    };
    if let Ending::StoreFailed(failure) = ending {
        eprintln!("error: {failure}");
        return Outcome::Trouble;
    }
    tracing::info!("shutting down");
    signals.exit_on_next();
    // Graceful stop: the admin API finishes the requests in flight, the spouts stop, trees in
    // flight finish, and what is scheduled stays in the store for the next start. All of it
    // within the stop timeout.
    let _ = stop_admin.send(());
    let (stopped, served) = tokio::join!(
        lifecycle::stop(running),
        tokio::time::timeout(lifecycle::STOP_TIMEOUT, admin)
    );
    watcher.stop();
    if let Some(p) = puller {
        p.stop();
    }
    let served = served
        .map_err(|_| "it did not finish its requests in time; stopping anyway".to_string())
        .and_then(admin_result);
    match (stopped, served) {
        (Err(e), _) => {
            eprintln!("error: stopping the topology: {e}");
            Outcome::Trouble
        }
        (Ok(_), Err(e)) => {
            eprintln!("error: the admin API failed: {e}");
            Outcome::Trouble
        }
        (Ok(_), Ok(())) => {
            tracing::info!("stopped");
            Outcome::Ok
        }
    }
}

/// What the admin API's task ended with.
fn admin_result(joined: Result<std::io::Result<()>, tokio::task::JoinError>) -> Result<(), String> {
    match joined {
        Ok(served) => served.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Logs go to stderr (stdout holds only the address line); `RUST_LOG` filters them.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
