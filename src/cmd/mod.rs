//! One module per subcommand.

pub mod check;
pub mod decide;
pub mod explain;
mod failure;
pub mod fmt;
pub mod paths;
pub mod run;
pub mod schema;
pub mod serve;
mod store;
pub mod test;

use crate::Outcome;
use rebound_engine::{CompiledSet, SourceFile};
use std::path::Path;

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

/// A duration flag: `250ms`, `30s`, `1h30m`.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    rebound_engine::duration::parse_duration(s).map_err(|e| e.to_string())
}
