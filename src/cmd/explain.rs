//! `rebound explain`: the decision plus the trace of every rule considered.

use super::failure::FailureArgs;
use crate::Outcome;
use rebound_engine::PolicyHandle;

/// Print the decision and why each rule did or did not decide.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  rebound explain --code NET_TIMEOUT --attempt 5 --signal fail_rate=0.7"
)]
pub struct Args {
    #[command(flatten)]
    failure: FailureArgs,
}

pub fn run(args: Args) -> Outcome {
    let f = &args.failure;
    let set = match super::load_rules(&f.rules, f.json) {
        Ok((set, _)) => set,
        Err(outcome) => return outcome,
    };
    let handle = PolicyHandle::new(set);
    let failure = f.failure();
    let explained = handle.explain(&failure.context(), &mut f.rng());
    if f.json {
        let doc = serde_json::json!({
            "decision": explained.decided.report(f.attempt),
            "trace": explained.trace,
            "note": explained.defaults_note,
        });
        println!("{doc}");
        return Outcome::Ok;
    }
    println!(
        "decision: {}",
        super::decide::describe(&explained.decided, f.attempt)
    );
    let width = explained
        .trace
        .iter()
        .map(|s| s.rule.len())
        .max()
        .unwrap_or(0);
    for (i, step) in explained.trace.iter().enumerate() {
        let detail = step
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        println!(
            "  {:>3}. {:<width$}  {:<28}  {}{detail}",
            i + 1,
            step.rule,
            step.at,
            step.result.replace('_', " ")
        );
    }
    if explained.decided.decision.rule().as_str() == "defaults" {
        println!("  no rule matched: the set's defaults decide");
    }
    if let Some(note) = &explained.defaults_note {
        println!("  note: {note}");
    }
    Outcome::Ok
}
