//! `rebound check`: load, validate and compile a set; print every error and warning.

use crate::Outcome;
use rebound_engine::Severity;
use std::path::PathBuf;

/// Load, validate and compile a rule set; print every error and warning.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  rebound check --rules rules --strict")]
pub struct Args {
    /// The rule set directory.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// Treat warnings as errors.
    #[arg(long)]
    strict: bool,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Outcome {
    let sources = match rebound_engine::read_dir(&args.rules) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "error: cannot read the rule set {}: {e}",
                args.rules.display()
            );
            return Outcome::Trouble;
        }
    };
    let (mut diags, set) = match rebound_engine::compile(sources.clone()) {
        Ok(set) => (set.warnings().to_vec(), Some(set)),
        Err(rejected) => (rejected.0, None),
    };
    if let Some(set) = &set
        && let Some(d) = nothing_to_decide(&args.rules, set)
    {
        diags.push(d);
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
        let doc = serde_json::json!({ "ok": ok, "errors": e, "warnings": w, "summary": summary });
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
        println!(
            "ok: {} files, {} rules{labels}, version {}{note}",
            set.files().len(),
            set.rules().len(),
            set.version()
        );
    } else {
        eprintln!("{errors} error(s), {warnings} warning(s): the set is rejected");
    }
    if ok { Outcome::Ok } else { Outcome::Wrong }
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
