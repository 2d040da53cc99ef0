//! Hot reload through the public API: the reloader (push, dry run, rollback, directory
//! reloads, history), whole sets under concurrent swaps, and the directory watcher.

mod canary;
mod history_files;
mod pipeline;
mod support;
mod swap;
#[cfg(feature = "watch")]
mod watch;
