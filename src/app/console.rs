//! What the user sees of a running application: the one place where `run` and `serve` look
//! different. `run` draws a progress bar, keeps its logs quiet and prints a report; `serve`
//! logs at `info` and prints one start-up line that scripts read the address from.

use super::{AdminListen, Options};
use crate::Outcome;
use crate::pipeline::{PipelineError, ProgressView, Report};
use rebound_engine::reload::Reloader;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;

/// The two faces of the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Console {
    /// `run`'s: a progress bar on stderr, with the log lines through it (by default only
    /// warnings and each rule set that a reload accepts; the store bolt's injected panics are
    /// kept quiet), the admin address on stderr, and the report on stdout at the end (exit 1
    /// if messages were lost).
    Progress,
    /// `serve`'s: log lines on stderr (`info` by default), and one start-up line on stdout,
    /// `listening on ADDR` (or `{"listening": ADDR, "version": …}` with `--json`).
    Server,
}

impl Console {
    /// The progress bar for `total` messages (`Progress`; hidden unless stderr is a terminal),
    /// or one that draws nothing.
    pub fn view(self, total: Option<u64>) -> ProgressView {
        match self {
            Console::Progress => ProgressView::stderr(total),
            Console::Server => ProgressView::hidden(),
        }
    }

    /// Whether the bar is kept up to date while the pipeline runs.
    pub fn shows_progress(self) -> bool {
        self == Console::Progress
    }

    /// Logs go to stderr (through the bar, for `Progress`); `RUST_LOG` filters them.
    ///
    /// `Progress` shows only warnings by default, and each rule set that a reload accepts (its
    /// version, source and file count; rejected ones are warnings). Every retry and dead letter
    /// is logged at `debug`/`info` (`RUST_LOG=info` shows the dead letters), and the store
    /// bolt's injected crashes are part of the show, so the bolt tasks' panic reports and the
    /// default panic message are kept quiet for them (the report counts them under `PANIC`).
    pub fn init_logging(self, view: &ProgressView) {
        match self {
            Console::Progress => {
                let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| {
                        tracing_subscriber::EnvFilter::new(
                            "warn,rebound_engine::reload::reloader=info,rebound_runtime::executor::bolt=off",
                        )
                    });
                let view = view.clone();
                let _ = tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(move || BarWriter(view.clone()))
                    .with_ansi(std::io::stderr().is_terminal())
                    .try_init();
                quiet_injected_panics();
            }
            Console::Server => {
                let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
                let _ = tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::stderr().is_terminal())
                    .try_init();
            }
        }
    }

    /// Why the admin listener could not be bound.
    pub(super) fn cannot_listen(self, listen: &AdminListen, e: &std::io::Error) -> String {
        match self {
            Console::Progress => format!("cannot listen on {:?}: {e}", listen.addrs),
            Console::Server => format!("cannot listen on {}: {e}", listen.addr),
        }
    }

    /// Why the pipeline could not start.
    pub(super) fn cannot_start(self, e: &PipelineError) -> String {
        match (self, e) {
            (Console::Progress, _) | (Console::Server, PipelineError::Lock(_)) => e.to_string(),
            (Console::Server, _) => format!("cannot start the bundled topology: {e}"),
        }
    }

    /// Why the graceful stop could not finish.
    pub(super) fn cannot_stop(self, e: &str) -> String {
        match self {
            Console::Progress => e.to_owned(),
            Console::Server => format!("stopping the topology: {e}"),
        }
    }

    /// Says where the admin API listens, once the pipeline runs.
    pub(super) fn announce(
        self,
        view: &ProgressView,
        bound: SocketAddr,
        reloader: &Reloader,
        options: &Options,
        token: bool,
    ) {
        match self {
            Console::Progress => view.suspend(|| eprintln!("admin API on http://{bound}")),
            Console::Server => {
                // The one line on stdout: tests and scripts read the port from it.
                if options.json {
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
                    rules = %options.rules.display(),
                    version = %reloader.handle().current().version(),
                    token,
                    "serving"
                );
            }
        }
    }

    /// A signal came: the graceful stop begins.
    pub(super) fn stopping(self, view: &ProgressView) {
        match self {
            Console::Progress => view.suspend(|| {
                eprintln!("stopping: letting the trees in flight finish (again to stop at once; the next run continues either way)")
            }),
            Console::Server => tracing::info!("shutting down"),
        }
    }

    /// The pipeline stopped with `report`: `Progress` prints it (exit 1 if messages were lost).
    pub(super) fn report(self, report: &Report, json: bool) -> Outcome {
        match self {
            Console::Progress => print_report(report, json),
            Console::Server => Outcome::Ok,
        }
    }

    /// Everything stopped cleanly.
    pub(super) fn stopped(self) {
        if self == Console::Server {
            tracing::info!("stopped");
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

/// The default panic message, except for the store bolt's injected faults.
fn quiet_injected_panics() {
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
