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
    /// How long until the earliest waiting retry is due, if one waits.
    pub next_retry_in: Option<Duration>,
}

impl Progress {
    /// The bar's message (short enough for 80 columns beside the bar). In the tail of a
    /// bounded run, where the bar would sit at ~99% while the last retries wait, it says how
    /// many wait and when the next is due.
    pub fn message(&self) -> String {
        let tail = self
            .total
            .is_some_and(|n| n > 0 && self.settled * 100 >= n * 95);
        match self.next_retry_in {
            Some(next) if tail && self.retry_queue > 0 => format!(
                "{} retr{} waiting, next in {:.1}s",
                self.retry_queue,
                if self.retry_queue == 1 { "y" } else { "ies" },
                next.as_secs_f64()
            ),
            _ => format!("{} dead · {} retries", self.dead_lettered, self.retries),
        }
    }
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
        self.bar.set_message(p.message());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_of_a_run_says_how_many_retries_wait_and_when_the_next_is_due() {
        let mut p = Progress {
            total: Some(50_000),
            settled: 20_000,
            dead_lettered: 12,
            retries: 4_000,
            retry_queue: 900,
            next_retry_in: Some(Duration::from_millis(40)),
            ..Progress::default()
        };
        assert_eq!(p.message(), "12 dead · 4000 retries");
        p.settled = 49_950;
        p.retry_queue = 50;
        p.next_retry_in = Some(Duration::from_millis(3_240));
        assert_eq!(p.message(), "50 retries waiting, next in 3.2s");
        p.retry_queue = 1;
        assert_eq!(p.message(), "1 retry waiting, next in 3.2s");
        // 80 columns: the bar's prefix takes about 44.
        assert!(p.message().len() <= 36);
    }
}
