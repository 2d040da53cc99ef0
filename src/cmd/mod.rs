//! One module per subcommand.

pub mod check;
pub mod decide;
pub mod explain;
mod failure;
pub mod fmt;
pub mod paths;
pub mod relay;
pub mod run;
pub mod schema;
pub mod serve;
mod store;
pub mod test;
pub mod whatif;

use crate::Outcome;
use rebound::config::{ConfigError, ConfigFile};
use rebound_engine::{CompiledSet, SourceFile};
use rebound_runtime::policy::TimeScale;
use std::path::{Path, PathBuf};

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

/// [`load_rules`] for a process that sends alerts to `receivers`: a set whose labels alert a
/// receiver they do not hold is rejected the same way, at the label's `alert`.
pub fn load_rules_for(
    dir: &Path,
    json: bool,
    receivers: &rebound::config::Receivers,
) -> Result<(CompiledSet, Vec<SourceFile>), Outcome> {
    let (set, sources) = load_rules(dir, json)?;
    let undefined = rebound::config::undefined_receivers(&set, receivers);
    if undefined.is_empty() {
        return Ok((set, sources));
    }
    crate::diagnostics::print(&undefined, &sources);
    if json {
        println!("{}", serde_json::json!({ "errors": undefined }));
    }
    Err(Outcome::Wrong)
}

/// Where `run` and `serve` find their rules and keep their data: the rule set directory (the
/// flag's, else the configuration file's, else `rules`) with its set, loaded as
/// [`load_rules_for`] loads it for the file's receivers, and the data directory (the flag's,
/// else the file's, else `rebound-data`).
pub fn rules_and_data(
    rules: Option<PathBuf>,
    data: Option<PathBuf>,
    json: bool,
    file: &ConfigFile,
) -> Result<(PathBuf, CompiledSet, PathBuf), Outcome> {
    let rules = rules
        .or_else(|| file.rules.clone())
        .unwrap_or_else(|| "rules".into());
    let (set, _) = load_rules_for(&rules, json, &file.receivers)?;
    let data = data
        .or_else(|| file.data.clone())
        .unwrap_or_else(|| "rebound-data".into());
    Ok((rules, set, data))
}

/// The scale of `--time-scale` (or the configuration file's `time_scale`): a factor it refuses
/// is said on stderr, exit 2.
/// `--time-scale`, else the file's `time_scale`, else 1 (real time); a factor that is not a
/// positive number is refused.
pub fn time_scale_of(flag: Option<f64>, file: &ConfigFile) -> Result<TimeScale, Outcome> {
    let factor = flag.or(file.time_scale).unwrap_or(1.0);
    if !(factor.is_finite() && factor > 0.0) {
        eprintln!("error: --time-scale must be a positive number, got {factor}");
        return Err(Outcome::Trouble);
    }
    time_scale(factor)
}

pub fn time_scale(factor: f64) -> Result<TimeScale, Outcome> {
    TimeScale::new(factor).map_err(|e| {
        eprintln!("error: --time-scale: {e}");
        Outcome::Trouble
    })
}

/// The configuration file of `--config`, or an empty one without the flag. A file that cannot
/// be read or is wrong is printed (its diagnostics as `check` prints a rule file's) and exits 2:
/// the process does not start.
pub fn load_config(path: Option<&Path>) -> Result<ConfigFile, Outcome> {
    let Some(path) = path else {
        return Ok(ConfigFile::default());
    };
    ConfigFile::load(path).map_err(|e| {
        print_config_error(&e);
        Outcome::Trouble
    })
}

/// Prints why a configuration file cannot be used, on stderr.
pub fn print_config_error(error: &ConfigError) {
    match error {
        ConfigError::Io { .. } => eprintln!("error: {error}"),
        ConfigError::Rejected {
            diagnostics,
            source,
        } => crate::diagnostics::print(diagnostics, std::slice::from_ref(source)),
    }
}

/// A duration flag: `250ms`, `30s`, `1h30m`.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    rebound_engine::duration::parse_duration(s).map_err(|e| e.to_string())
}
