//! `rebound run`: the main job. Runs the bundled order pipeline on the rules (reloaded live
//! when a rule file changes) until every message has its fate, or until Ctrl-C / SIGTERM, and
//! prints the report. The pipeline itself lives in `rebound::pipeline`.

use super::lifecycle::{self, Ending, Signals};
use crate::Outcome;
use rebound::admin::auth::{TOKEN_ENV, Token};
use rebound::admin::{self, AdminState};
use rebound::metrics::Metrics;
use rebound::pipeline::{self, PipelineOptions, ProgressView, Report};
use rebound_engine::reload::{Reloader, WatchOptions, Watcher};
use rebound_runtime::policy::TimeScale;
use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Run the bundled order pipeline to the end and report.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    rebound run                                   # 50,000 orders at 100× speed, then the report\n  \
    rebound run --messages 20000 --json           # one JSON document on stdout\n  \
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
        Some(addr) => match admin_addrs(addr) {
            Ok(a) => Some(a),
            Err(outcome) => return outcome,
        },
    };
    let view = ProgressView::stderr(Some(args.messages));
    init_logging(view.clone());

    let (set, _) = match super::load_rules(&args.rules, args.json) {
        Ok(loaded) => loaded,
        Err(outcome) => {
            view.finish();
            return outcome;
        }
    };
    let (reloader, metrics) = super::live_rules(&args.rules, set);

    let runtime = match super::async_runtime() {
        Ok(r) => r,
        Err(e) => {
            view.finish();
            eprintln!("error: cannot start the async runtime: {e}");
            return Outcome::Trouble;
        }
    };
    let outcome = runtime.block_on(run_pipeline(
        args,
        scale,
        admin,
        reloader,
        metrics,
        view.clone(),
    ));
    view.finish();
    // Whatever is still running (a blocking write on a store that hangs) is not waited for.
    runtime.shutdown_timeout(super::RUNTIME_SHUTDOWN);
    outcome
}

/// The admin address and token, checked as `serve` checks them.
fn admin_addrs(addr: &str) -> Result<(Vec<SocketAddr>, Option<Token>), Outcome> {
    let token = Token::configured(None).map_err(|e| {
        eprintln!("error: {e}");
        Outcome::Trouble
    })?;
    let addrs: Vec<SocketAddr> = match addr.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => {
            eprintln!(
                "error: --admin {addr}: not an address (expected HOST:PORT, e.g. 127.0.0.1:8080): {e}"
            );
            return Err(Outcome::Trouble);
        }
    };
    if token.is_none() && !addrs.iter().all(admin::is_loopback) {
        eprintln!(
            "error: refusing to serve the admin API on {addr} without a token: it is not a \
             loopback address. Set {TOKEN_ENV}, or listen on 127.0.0.1."
        );
        return Err(Outcome::Trouble);
    }
    Ok((addrs, token))
}

async fn run_pipeline(
    args: Args,
    scale: TimeScale,
    admin: Option<(Vec<SocketAddr>, Option<Token>)>,
    reloader: Arc<Reloader>,
    metrics: Arc<Metrics>,
    view: ProgressView,
) -> Outcome {
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot install the signal handlers: {e}");
            return Outcome::Trouble;
        }
    };
    let mut options = PipelineOptions::new(reloader.handle().clone(), &args.data);
    options.messages = Some(args.messages);
    options.time_scale = scale;
    options.store_give_up = args.store_give_up;
    let pipeline = match pipeline::start(options).await {
        Ok(p) => p,
        Err(e) => {
            view.finish();
            eprintln!("error: {e}");
            return Outcome::Trouble;
        }
    };
    if pipeline.already_finished() {
        view.finish();
        tracing::info!("this run already finished; its report follows");
    }
    let watcher = match Watcher::spawn(Arc::clone(&reloader), WatchOptions::default()) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, rules = %args.rules.display(), "cannot watch the rules; edits will not be picked up");
            None
        }
    };
    let (admin_stop, admin_task) = match admin {
        None => (None, None),
        Some((addrs, token)) => {
            let listener = match tokio::net::TcpListener::bind(addrs.as_slice()).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("error: cannot listen on {addrs:?}: {e}");
                    return Outcome::Trouble;
                }
            };
            if let Ok(bound) = listener.local_addr() {
                view.suspend(|| eprintln!("admin API on http://{bound}"));
            }
            let state = AdminState {
                reloader: Arc::clone(&reloader),
                metrics,
                token,
                dead_letters: None, // serve_admin makes the pipeline the desk
            };
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(pipeline::serve_admin(
                listener,
                state,
                pipeline.handle(),
                async {
                    let _ = stopped.await;
                },
            ));
            (Some(stop), Some(task))
        }
    };

    let handle = pipeline.handle();
    let bar = view.clone();
    let progress = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            bar.update(&handle.progress());
        }
    });

    let handle = pipeline.handle();
    let ending = tokio::select! {
        () = pipeline.finished() => Ending::Finished,
        ending = lifecycle::interrupted_or_failed(&mut signals, &handle) => ending,
    };
    match ending {
        Ending::Finished => {}
        Ending::Interrupted => view.suspend(|| {
            eprintln!("stopping: letting the trees in flight finish (again to stop at once; the next run continues either way)")
        }),
        Ending::StoreFailed(failure) => {
            progress.abort();
            view.finish();
            eprintln!("error: {failure}");
            return Outcome::Trouble;
        }
    }
    // A signal during the stop stops at once.
    signals.exit_on_next();
    let report = lifecycle::stop(pipeline).await;
    progress.abort();
    view.finish();
    if let Some(w) = watcher {
        w.stop();
    }
    if let Some(stop) = admin_stop {
        let _ = stop.send(());
    }
    if let Some(task) = admin_task {
        let _ = task.await;
    }
    match report {
        Ok(report) => print_report(&report, args.json),
        Err(e) => {
            eprintln!("error: {e}");
            Outcome::Trouble
        }
    }
}

fn print_report(report: &Report, json: bool) -> Outcome {
    let mut out = std::io::stdout().lock();
    let text = if json {
        format!("{}\n", report.json())
    } else {
        report.text()
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    if report.lost > 0 {
        eprintln!("error: {} messages were lost", report.lost);
        Outcome::Wrong
    } else {
        Outcome::Ok
    }
}

/// Writes log lines to stderr without tearing the progress bar.
struct BarWriter(ProgressView);

impl Write for BarWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.suspend(|| std::io::stderr().write_all(buf))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Logs go to stderr, through the bar. By default only warnings, and each rule set that a
/// reload accepts (its version, source and file count; rejected ones are warnings). Every
/// retry and dead letter is logged at `debug`/`info` (`RUST_LOG=info` shows the dead
/// letters), and the store bolt's
/// injected crashes are part of the show, so the bolt tasks' panic reports and the default
/// panic message are kept quiet for them (the report counts them under `PANIC`).
fn init_logging(view: ProgressView) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,rebound_engine::reload::reloader=info,rebound_runtime::executor::bolt=off",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || BarWriter(view.clone()))
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if !message.starts_with("injected fault") {
            default_hook(info);
        }
    }));
}
