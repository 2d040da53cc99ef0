//! Running one case: on its own thread (named after the case, so that even a stack overflow,
//! which aborts the process, says which case it was), with panics caught and a time limit.

use rebound_engine::Diagnostic;
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The stack of a case's thread: that of a Rust thread and of tokio's blocking pool, where
/// the admin API compiles a pushed set.
const STACK: usize = 2 << 20;

/// What compiling one input gave, when it finished.
pub struct Outcome {
    pub accepted: bool,
    /// Diagnostics without a line or column although their file has content.
    pub unlocated: Vec<Diagnostic>,
}

/// How one case ended.
pub enum Verdict {
    Done(Outcome),
    Panic(String),
    /// Still running after the time limit; its thread is left to finish on its own.
    Hang(JoinHandle<()>),
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic hook that prints nothing and keeps the message (with its place) for the case.
pub fn quiet_panics() {
    panic::set_hook(Box::new(|info| {
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
    }));
}

/// Runs `job` on a thread named `name`, for at most `limit`.
pub fn run(
    name: String,
    limit: Duration,
    job: impl FnOnce() -> Outcome + Send + 'static,
) -> Verdict {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name(name)
        .stack_size(STACK)
        .spawn(move || {
            let verdict = match panic::catch_unwind(AssertUnwindSafe(job)) {
                Ok(outcome) => Ok(outcome),
                Err(payload) => Err(LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .unwrap_or_else(|| payload_text(payload.as_ref()))),
            };
            let _ = tx.send(verdict);
        });
    let handle = match spawned {
        Ok(handle) => handle,
        Err(e) => return Verdict::Panic(format!("cannot start the case's thread: {e}")),
    };
    match rx.recv_timeout(limit) {
        Ok(verdict) => {
            let _ = handle.join();
            match verdict {
                Ok(outcome) => Verdict::Done(outcome),
                Err(message) => Verdict::Panic(message),
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Verdict::Hang(handle),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Verdict::Panic("the case's thread ended without a verdict".into())
        }
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".into())
}

/// Whether a file has anything but whitespace, so that its diagnostics can have a place.
pub fn has_content(bytes: &[u8]) -> bool {
    bytes.iter().any(|b| !b.is_ascii_whitespace())
}

/// The diagnostics of `diags` without a position whose file (by path) has content.
pub fn unlocated(diags: &[Diagnostic], content: &HashMap<String, bool>) -> Vec<Diagnostic> {
    diags
        .iter()
        .filter(|d| d.line.is_none() || d.column.is_none())
        .filter(|d| content.get(&d.file).copied().unwrap_or(false))
        .cloned()
        .collect()
}
