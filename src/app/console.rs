//! What the user sees of a running application: the one place where `run` and `serve` look
//! different. `run` draws a progress bar, keeps its logs quiet and prints a report; `serve`
//! logs at `info` and prints one start-up line that scripts read the address from. Both write
//! their log lines as text or, with `--log-format json`, as one JSON object per line, and
//! both log a panic that the executor caught (an injected crash of the store bolt) as one
//! line.

use super::job::Summary;
use super::{AdminListen, JobError, Options};
use crate::Outcome;
use crate::pipeline::{PipelineError, ProgressView};
use rebound_engine::reload::Reloader;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::OnceLock;

/// How log lines are written on stderr (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines: time, level, target, message, then the fields.
    #[default]
    Text,
    /// One JSON object per line: `{"timestamp", "level", "fields": {"message", …}, "target",
    /// "span"?, "spans"?}` (tracing-subscriber's JSON format). Everything else the process
    /// writes on stderr while it runs (the admin address, errors) takes the same shape.
    Json,
}

/// The format chosen at [`Console::init_logging`], for the lines written beside the logs.
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Writes one line for the user on stderr, whatever the log filter: `text` as it is, or,
/// with `--log-format json`, a JSON object shaped like the log lines (level `level`).
pub(crate) fn say(level: &str, text: &str) {
    if FORMAT.get() == Some(&LogFormat::Json) {
        let line = serde_json::json!({
            "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            "level": level,
            "fields": { "message": text },
            "target": "rebound",
        });
        eprintln!("{line}");
    } else {
        eprintln!("{text}");
    }
}

/// `error: {text}` on stderr (see [`say`]; in JSON, level `ERROR` and the text alone).
pub(crate) fn say_error(text: impl std::fmt::Display) {
    if FORMAT.get() == Some(&LogFormat::Json) {
        say("ERROR", &text.to_string());
    } else {
        eprintln!("error: {text}");
    }
}

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

    /// Logs go to stderr (through the bar, for `Progress`) in `format`; `RUST_LOG` filters
    /// them.
    ///
    /// `Progress` shows only warnings by default, and each rule set that a reload accepts (its
    /// version, source and file count; rejected ones are warnings). Every retry (with its id,
    /// attempt, rule, code and delay) and dead letter is logged at `info` (`RUST_LOG=info`
    /// shows them). The store bolt's injected crashes are part of the show: `Progress` keeps
    /// the bolt tasks' panic lines quiet by default (the report counts them under `PANIC`).
    ///
    /// Either way, a panic that the executor catches (in a bolt, a spout or the policy) is one
    /// log line, the executor's, with the panic's message and location: the panic hook prints
    /// nothing for it (no default message, no backtrace). Every other panic gets the default
    /// hook, as before.
    pub fn init_logging(self, view: &ProgressView, format: LogFormat) {
        let _ = FORMAT.set(format);
        let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(match self {
                Console::Progress => {
                    "warn,rebound_engine::reload::reloader=info,rebound_runtime::executor::bolt=off"
                }
                Console::Server => "info",
            })
        });
        let ansi = format == LogFormat::Text && std::io::stderr().is_terminal();
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(ansi);
        let _ = match (self, format) {
            (Console::Progress, LogFormat::Text) => {
                let view = view.clone();
                builder
                    .with_writer(move || BarWriter(view.clone()))
                    .try_init()
            }
            (Console::Progress, LogFormat::Json) => {
                let view = view.clone();
                builder
                    .json()
                    .with_writer(move || BarWriter(view.clone()))
                    .try_init()
            }
            (Console::Server, LogFormat::Text) => builder.with_writer(std::io::stderr).try_init(),
            (Console::Server, LogFormat::Json) => {
                builder.json().with_writer(std::io::stderr).try_init()
            }
        };
        one_line_caught_panics();
    }

    /// Why the admin listener could not be bound.
    pub(super) fn cannot_listen(self, listen: &AdminListen, e: &std::io::Error) -> String {
        match self {
            Console::Progress => format!("cannot listen on {:?}: {e}", listen.addrs),
            Console::Server => format!("cannot listen on {}: {e}", listen.addr),
        }
    }

    /// Why the job could not start.
    pub(super) fn cannot_start(self, e: &JobError) -> String {
        match (self, e) {
            (Console::Progress, _)
            | (Console::Server, JobError::Pipeline(PipelineError::Lock(_))) => e.to_string(),
            (Console::Server, _) => format!("cannot start the bundled topology: {e}"),
        }
    }

    /// Why the graceful stop could not finish.
    pub(super) fn cannot_stop(self, e: &JobError) -> String {
        match self {
            Console::Progress => e.to_string(),
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
            Console::Progress => {
                view.suspend(|| say("INFO", &format!("admin API on http://{bound}")))
            }
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
                say("INFO", "stopping: letting the trees in flight finish (again to stop at once; the next run continues either way)")
            }),
            Console::Server => tracing::info!("shutting down"),
        }
    }

    /// Whether the report is printed at the end (`Progress`): the stop reads it only then.
    pub(super) fn prints_report(self) -> bool {
        self == Console::Progress
    }

    /// The job stopped with `report` (the bundled pipeline's is read if
    /// [`Console::prints_report`]; a relay always has one): printed on stdout (exit 1 if
    /// messages were lost).
    pub(super) fn report(self, report: Option<&dyn Summary>, json: bool) -> Outcome {
        match report {
            Some(report) => print_report(report, json),
            None => Outcome::Ok,
        }
    }

    /// Everything stopped cleanly.
    pub(super) fn stopped(self) {
        if self == Console::Server {
            tracing::info!("stopped");
        }
    }
}

fn print_report(report: &dyn Summary, json: bool) -> Outcome {
    let mut out = std::io::stdout().lock();
    let text = if json {
        format!("{}\n", report.json())
    } else {
        report.text()
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    if report.lost() > 0 {
        say_error(format_args!("{} messages were lost", report.lost()));
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

/// The default panic hook, except for the panics the executor catches: it logs those itself,
/// as one line with the message and the location this hook hands it
/// ([`rebound_runtime::caught_panic`] tells them apart by a flag the executor sets on its
/// thread while user code runs). So an injected crash is one line, not a message and a
/// backtrace per crash, and a genuine panic anywhere else (the main thread, a task that is
/// not a bolt) still prints in full.
fn one_line_caught_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !rebound_runtime::caught_panic(info) {
            default_hook(info);
        }
    }));
}
