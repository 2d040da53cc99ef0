//! The file watcher: reloads the set when the rules directory changes.
//!
//! It watches the directory itself, not the files, because every way of saving replaces
//! or touches a directory entry:
//!
//! - editors that write a temporary file and rename it over the original (vim, IDEs);
//! - in-place truncating saves (`>`, many editors' default);
//! - Kubernetes ConfigMap mounts, where `name.yaml -> ..data/name.yaml` stays put and the
//!   `..data` symlink is swapped to a new directory.
//!
//! Events pass through notify's debouncer, then one more settle period: a reload starts
//! only after the directory has been quiet for `debounce`, so a burst of writes coalesces
//! into one reload. The reload itself goes through the [`Reloader`], which makes the echo of
//! its own writes (a push, a rollback) a no-op and never reads half of a push.
//!
//! A directory that cannot be read for want of a passing resource (too many open files) is
//! read again, after 100 ms, then twice as long each time up to 5 s, until it can be: each
//! failed read is a rejected attempt in the history and the metrics, and the edit is applied
//! once the resource is back, never silently lost.

use super::reloader::{Reloaded, Reloader};
use crate::backoff::Doubling;
use crate::load::is_rule_file_name;
use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{
    DebounceEventResult, DebouncedEvent, Debouncer, RecommendedCache, new_debouncer,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the watcher waits for a burst of changes to end.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Quiet time after the last change before reloading (default 200 ms).
    pub debounce: Duration,
    /// Longest a steady stream of changes may delay a reload (default 5 s).
    pub max_delay: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

enum Message {
    Events(DebounceEventResult),
    Stop,
}

/// A running watcher; it stops when dropped or [`stop`](Self::stop)ped.
pub struct Watcher {
    debouncer: Option<Debouncer<RecommendedWatcher, RecommendedCache>>,
    stop: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Watcher {
    /// Watches `reloader`'s directory and reloads it on every settled change.
    pub fn spawn(reloader: Arc<Reloader>, options: WatchOptions) -> notify::Result<Watcher> {
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let mut debouncer = new_debouncer(options.debounce, None, move |r| {
            let _ = events.send(Message::Events(r));
        })?;
        debouncer.watch(reloader.dir(), RecursiveMode::NonRecursive)?;
        tracing::info!(dir = %reloader.dir().display(), "watching the rules directory");
        let thread = std::thread::Builder::new()
            .name("rebound-watch".into())
            .spawn(move || watch_loop(&reloader, &rx, options))
            .map_err(notify::Error::io)?;
        Ok(Watcher {
            debouncer: Some(debouncer),
            stop: tx,
            thread: Some(thread),
        })
    }

    /// Stops watching and waits for a reload in progress to finish.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(debouncer) = self.debouncer.take() {
            debouncer.stop_nonblocking();
        }
        let _ = self.stop.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Waits for a relevant change, lets the burst settle, reloads; until told to stop.
fn watch_loop(reloader: &Reloader, rx: &mpsc::Receiver<Message>, options: WatchOptions) {
    let dir = reloader.dir().to_path_buf();
    loop {
        match rx.recv() {
            Ok(Message::Events(batch)) if relevant(&dir, &batch) => {}
            Ok(Message::Events(_)) => continue,
            Ok(Message::Stop) | Err(_) => return,
        }
        let first = Instant::now();
        let mut quiet_until = first + options.debounce;
        loop {
            let now = Instant::now();
            if now >= quiet_until || now.duration_since(first) >= options.max_delay {
                break;
            }
            match rx.recv_timeout(quiet_until - now) {
                Ok(Message::Events(batch)) => {
                    if relevant(&dir, &batch) {
                        quiet_until = Instant::now() + options.debounce;
                    }
                }
                Err(RecvTimeoutError::Timeout) => break,
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let pauses = Doubling::new(RETRY_FIRST, RETRY_MAX);
        let mut failures = 0;
        loop {
            match reloader.reload_dir() {
                Ok(Reloaded::Accepted(_)) | Ok(Reloaded::Unchanged(_)) => break,
                // Out of file descriptors, say: recorded as rejected, and read again until
                // it can be read, so that the edit is not lost.
                Err(e) if e.is_passing() => {
                    failures += 1;
                    let pause = pauses.after(failures);
                    tracing::warn!("{e}; the rules directory is read again in {pause:?}");
                    if !wait(rx, pause) {
                        return;
                    }
                }
                // The pipeline has logged and recorded it; the current set stays.
                Err(_) => break,
            }
        }
    }
}

/// The first pause before a directory that could not be read is read again; it doubles up
/// to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);

/// The longest pause between two reads of a directory that could not be read.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Waits `pause` (changes meanwhile are read by the next try); false when told to stop.
fn wait(rx: &mpsc::Receiver<Message>, pause: Duration) -> bool {
    let until = Instant::now() + pause;
    loop {
        let now = Instant::now();
        if now >= until {
            return true;
        }
        match rx.recv_timeout(until - now) {
            Ok(Message::Events(_)) => {}
            Err(RecvTimeoutError::Timeout) => return true,
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// Whether a batch may have changed the set: anything but reads (the reloader's own reads
/// produce `open`/`close` events), on a rule file, on a ConfigMap's `..data` entries, or
/// on the directory itself. Editors' swap files and our own temporary files are ignored.
fn relevant(dir: &Path, batch: &DebounceEventResult) -> bool {
    match batch {
        Err(errors) => {
            for e in errors {
                tracing::warn!("watching the rules directory: {e}");
            }
            true
        }
        Ok(events) => events.iter().any(|e| event_is_relevant(dir, e)),
    }
}

fn event_is_relevant(dir: &Path, event: &DebouncedEvent) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    if event.need_rescan() || event.paths.is_empty() {
        return true;
    }
    event.paths.iter().any(|p| {
        p == dir
            || p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| is_rule_file_name(n) || n.starts_with(".."))
    })
}
