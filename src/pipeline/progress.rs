//! A progress bar for a running pipeline, on stderr (`indicatif`), hidden when stderr is not a
//! terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where a running pipeline stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Messages in the run (`None`: unbounded).
    pub total: Option<u64>,
    /// Messages with a fate, including those from earlier sessions.
    pub settled: u64,
    /// Messages acked in this session.
    pub acked: u64,
    /// Messages dead-lettered in this session.
    pub dead_lettered: u64,
    /// Retries scheduled in this session.
    pub retries: u64,
    /// Messages waiting in the retry queue now.
    pub retry_queue: u64,
    /// Trees in flight now.
    pub pending: u64,
    /// Writes waiting for the journal.
    pub journal_backlog: u64,
}

/// The bar. Route log lines through [`ProgressView::suspend`] so they do not tear it.
#[derive(Clone, Debug)]
pub struct ProgressView {
    bar: ProgressBar,
}

impl ProgressView {
    /// A bar on stderr for `total` messages; hidden unless stderr is a terminal.
    pub fn stderr(total: Option<u64>) -> ProgressView {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr_with_hz(8)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(total, target);
        let template = if total.is_some() {
            "{spinner} {elapsed:>4} [{bar:20}] {pos}/{len} · {msg}"
        } else {
            "{spinner} {elapsed:>4} {pos} settled · {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(125));
        ProgressView { bar }
    }

    /// A bar that draws nothing.
    pub fn hidden() -> ProgressView {
        ProgressView {
            bar: ProgressBar::hidden(),
        }
    }

    /// True if nothing is drawn.
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Shows `p`.
    pub fn update(&self, p: &Progress) {
        self.bar.set_position(p.settled);
        // Short enough for 80 columns.
        self.bar
            .set_message(format!("{} dead · {} retries", p.dead_lettered, p.retries));
    }

    /// Runs `f` with the bar cleared (to print something), then draws it again.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Clears the bar for good.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
