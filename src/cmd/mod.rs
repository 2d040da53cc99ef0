//! One module per subcommand.

pub mod check;
pub mod decide;
pub mod explain;
mod failure;
mod lifecycle;
pub mod paths;
pub mod run;
pub mod schema;
pub mod serve;
pub mod test;

use crate::Outcome;
use rebound::metrics::Metrics;
use rebound_engine::reload::{ReloadOptions, Reloader};
use rebound_engine::{CompiledSet, SourceFile};
use std::path::Path;
use std::sync::Arc;

/// Reads and compiles the set in `dir`, printing diagnostics the way `check` does.
///
/// Returns the set and its sources, or the exit outcome when it cannot be used.
pub fn load_rules(dir: &Path, json: bool) -> Result<(CompiledSet, Vec<SourceFile>), Outcome> {
    let sources = match rebound_engine::read_dir(dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot read the rule set {}: {e}", dir.display());
            return Err(Outcome::Trouble);
        }
    };
    match rebound_engine::compile(sources.clone()) {
        Ok(set) => Ok((set, sources)),
        Err(rejected) => {
            crate::diagnostics::print(&rejected.0, &sources);
            if json {
                println!("{}", serde_json::json!({ "errors": rejected.0 }));
            }
            Err(Outcome::Wrong)
        }
    }
}

/// The live rules of a long-running command: a [`Reloader`] over `dir` starting with `set`,
/// and the metrics registry that counts its reloads.
pub fn live_rules(dir: &Path, set: CompiledSet) -> (Arc<Reloader>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let observer = Arc::clone(&metrics);
    let options = ReloadOptions::default().on_reload(move |entry| observer.rules.observe(entry));
    (Arc::new(Reloader::new(dir, set, options)), metrics)
}

/// A duration flag: `250ms`, `30s`, `1h30m`.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    rebound_engine::duration::parse_duration(s).map_err(|e| e.to_string())
}

/// How long the async runtime of `run` and `serve` waits for its tasks once the command is
/// done (the process exits after it in any case).
pub const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

/// The async runtime of `run` and `serve`: two workers, one per core of the target machine.
pub fn async_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
