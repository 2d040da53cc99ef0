//! `rebound check`: load, validate and compile a set; print every error and warning. With
//! `--config FILE`, the configuration file of `run` and `serve` first, then the set it names
//! (unless `--rules` names another).

use crate::Outcome;
use rebound::admin::auth::Token;
use rebound::app::{AdminListen, TokenFrom};
use rebound::config::{ConfigError, ConfigFile};
use rebound_engine::Severity;
use std::path::{Path, PathBuf};

/// Load, validate and compile a rule set; print every error and warning.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  rebound check --rules rules --strict\n  \
    rebound check --config /etc/rebound/config.yaml   # the file, then the rules it names")]
pub struct Args {
    /// The rule set directory [default: `rules` of --config, else rules].
    #[arg(long, value_name = "DIR")]
    rules: Option<PathBuf>,
    /// Also validate this configuration file of `run` and `serve` (starting nothing); a wrong
    /// one exits 1 before the rules are checked.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Treat warnings as errors.
    #[arg(long)]
    strict: bool,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Outcome {
    let config = match &args.config {
        None => None,
        Some(path) => match checked_config(path, args.json) {
            Ok(file) => Some((path, file)),
            Err(outcome) => return outcome,
        },
    };
    if let Some((_, file)) = &config
        && let Err(outcome) = admin_as_the_commands_check_it(file)
    {
        return outcome;
    }
    let rules = args
        .rules
        .clone()
        .or_else(|| config.as_ref().and_then(|(_, file)| file.rules.clone()))
        .unwrap_or_else(|| PathBuf::from("rules"));
    let sources = match rebound_engine::read_dir(&rules) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot read the rule set {}: {e}", rules.display());
            return Outcome::Trouble;
        }
    };
    let (mut diags, set) = match rebound_engine::compile(sources.clone()) {
        Ok(set) => (set.warnings().to_vec(), Some(set)),
        Err(rejected) => (rejected.0, None),
    };
    if let Some(set) = &set
        && let Some(d) = nothing_to_decide(&rules, set)
    {
        diags.push(d);
    }
    // `run` and `serve` refuse a set that alerts a receiver the configuration lacks.
    if let (Some(set), Some((_, file))) = (&set, &config) {
        diags.extend(rebound::config::undefined_receivers(set, &file.receivers));
    }
    if args.strict {
        for d in &mut diags {
            d.severity = Severity::Error;
        }
    }
    crate::diagnostics::print(&diags, &sources);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    let ok = errors == 0;
    if args.json {
        let (e, w): (Vec<_>, Vec<_>) = diags.iter().partition(|d| d.is_error());
        let summary = set.as_ref().filter(|_| ok).map(|s| {
            serde_json::json!({
                "files": s.files().len(),
                "rules": s.rules().len(),
                "labels": s.labels().len(),
                "version": s.version(),
            })
        });
        let mut doc =
            serde_json::json!({ "ok": ok, "errors": e, "warnings": w, "summary": summary });
        if let Some((path, file)) = &config {
            doc["config"] = config_summary(path, file);
        }
        println!("{doc}");
    } else if let Some(set) = set.as_ref().filter(|_| ok) {
        let note = match warnings {
            0 => String::new(),
            1 => ", 1 warning".to_string(),
            n => format!(", {n} warnings"),
        };
        // Labels are counted only when the set defines some, so the line of a set without
        // them stays as it always was.
        let labels = match set.labels().len() {
            0 => String::new(),
            1 => ", 1 label".to_string(),
            n => format!(", {n} labels"),
        };
        let config_note = config.as_ref().map_or(String::new(), |(path, file)| {
            let n = file.receivers.len();
            let s = if n == 1 { "" } else { "s" };
            format!("; configuration {}: ok, {n} receiver{s}", path.display())
        });
        println!(
            "ok: {} files, {} rules{labels}, version {}{note}{config_note}",
            set.files().len(),
            set.rules().len(),
            set.version()
        );
    } else {
        eprintln!("{errors} error(s), {warnings} warning(s): the set is rejected");
    }
    if ok { Outcome::Ok } else { Outcome::Wrong }
}

/// The configuration file at `path`, or the outcome when it is wrong (its diagnostics printed,
/// and with `json` the document that says so: exit 1) or cannot be read (exit 2).
fn checked_config(path: &Path, json: bool) -> Result<ConfigFile, Outcome> {
    match ConfigFile::load(path) {
        Ok(file) => Ok(file),
        Err(e @ ConfigError::Io { .. }) => {
            super::print_config_error(&e);
            Err(Outcome::Trouble)
        }
        Err(ConfigError::Rejected {
            diagnostics,
            source,
        }) => {
            crate::diagnostics::print(&diagnostics, std::slice::from_ref(&source));
            if json {
                let doc = serde_json::json!({
                    "ok": false, "errors": diagnostics, "warnings": [], "summary": null,
                    "config": { "file": path.display().to_string(), "ok": false },
                });
                println!("{doc}");
            } else {
                eprintln!(
                    "{} error(s): the configuration {} is rejected",
                    diagnostics.len(),
                    path.display()
                );
            }
            Err(Outcome::Wrong)
        }
    }
}

/// What `run` and `serve` would refuse of the file's `admin:` before they start, refused here
/// the same way and with the same message (exit 2): a token file that cannot be read, and a
/// non-loopback address without a token ([`AdminListen::check`], the commands' own check).
/// Without an address, the token file is still read, as `serve --admin` would read it.
fn admin_as_the_commands_check_it(file: &ConfigFile) -> Result<(), Outcome> {
    // The store's password file is read as `run` and `serve` read it.
    if let Some(store) = &file.store
        && store.url != "sqlite"
    {
        super::store::store_password(&store.url, false, store.password_file.as_deref())?;
    }
    let token_file = file.admin.token_file.clone();
    match &file.admin.addr {
        Some(addr) => AdminListen::check(addr, TokenFrom::FileOrEnv(token_file)).map(|_| ()),
        None => match token_file {
            Some(path) => Token::configured(Some(&path)).map(|_| ()).map_err(|e| {
                eprintln!("error: {e}");
                Outcome::Trouble
            }),
            None => Ok(()),
        },
    }
}

/// What `--json` says of a configuration file that loaded.
fn config_summary(path: &Path, file: &ConfigFile) -> serde_json::Value {
    let receivers: Vec<&str> = file.receivers.iter().map(|r| r.name.as_str()).collect();
    serde_json::json!({
        "file": path.display().to_string(),
        "ok": true,
        "receivers": receivers,
    })
}

/// A warning when no file of the set says anything: every decision would then come from the
/// built-in defaults, which usually means `--rules` names the wrong directory.
fn nothing_to_decide(
    dir: &std::path::Path,
    set: &rebound_engine::CompiledSet,
) -> Option<rebound_engine::Diagnostic> {
    if set.rules().len() > 0 || set.defaults().file.is_some() {
        return None;
    }
    let what = if set.files().is_empty() {
        "has no rule files (*.yaml or *.yml directly inside it)"
    } else {
        "declares no rules and no defaults"
    };
    Some(rebound_engine::Diagnostic::warning(
        dir.display().to_string(),
        None,
        format!(
            "the rule set {what}: every decision would come from the built-in defaults (3 retries, exponential backoff from 1s with full jitter, dead letter 'default'); is --rules the right directory?"
        ),
    ))
}
