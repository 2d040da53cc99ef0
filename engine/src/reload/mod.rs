//! Hot reload: new rule sets while decisions go on.
//!
//! - [`Reloader`] (`reloader.rs`): load, validate and compile a whole set, and only then swap
//!   it into the [`PolicyHandle`](crate::PolicyHandle); push with `If-Match`, dry runs,
//!   rollback to previous accepted sets. Every attempt is logged (`tracing`) and recorded.
//! - `outcomes.rs`: the reloader's options, `If-Match`, and what a reload answers.
//! - `history.rs`: the bounded record of attempts, accepted and rejected
//!   ([`HistoryEntry`]), and the files of the last [`FILES_KEPT`] accepted versions
//!   ([`Reloader::history_files`], [`Reloader::rollback_to`]).
//! - `Watcher` (`watch.rs`, feature `watch`): reloads when the rules directory changes
//!   (rename saves, in-place saves, ConfigMap symlink swaps), one reload per burst.
//! - `pull` (feature `pull`): polls a config center over HTTP with `ETag`s.
//! - `record.rs`: [`SetRecord`], the set of record several processes share (a fleet's
//!   store): every set this process accepts is published to it first, compare-and-set.
//! - `files.rs`: pushed names are plain `*.yaml` of at most 242 bytes; sets are
//!   written into the directory atomically, file by file, so they survive a restart.

mod files;
mod history;
mod outcomes;
#[cfg(feature = "pull")]
pub mod pull;
mod record;
mod reloader;
#[cfg(feature = "watch")]
mod watch;

pub use crate::handle::{Source, Status};
pub use history::{Actor, FILES_KEPT, HistoryEntry, Outcome};
pub use record::{Publication, PublishError, SetRecord};
pub use reloader::{
    IfMatch, PushError, Pushed, ReloadError, ReloadListener, ReloadOptions, Reloaded, Reloader,
    RollbackError, SetCheck,
};
#[cfg(feature = "watch")]
pub use watch::{WatchOptions, Watcher};
