//! `rebound decide`: print the decision for one failure.

use super::failure::FailureArgs;
use crate::Outcome;
use rebound_engine::duration::DurationDisplay;
use rebound_engine::{Decided, Decision};

/// Print the decision for one failure.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  rebound decide --biz PAYMENT --code PAY_PROCESSING --attempt 1 --json"
)]
pub struct Args {
    #[command(flatten)]
    failure: FailureArgs,
}

/// Prints the decision; `Err` is the outcome to exit with when the rule set cannot be used.
pub fn run(args: Args) -> Result<Outcome, Outcome> {
    let f = &args.failure;
    let handle = f.policy()?;
    let failure = f.failure();
    let ctx = failure.context();
    let decided = handle.decide(&ctx, &mut f.rng());
    let set = handle.current();
    if f.json {
        let keys = rebound::falls_under::keys(&set, &ctx);
        println!(
            "{}",
            rebound::falls_under::with_keys(&decided.report(f.attempt), keys)
        );
    } else {
        println!("{}", describe(&decided, f.attempt));
        if let Some(line) = rebound::falls_under::line(&set, &ctx) {
            println!("{line}");
        }
    }
    Ok(Outcome::Ok)
}

/// One line for people: `retry after 100ms (rule payment-processing, attempt 1, version …)`.
pub fn describe(decided: &Decided, attempt: u32) -> String {
    let tail = format!(
        "(rule {}, attempt {attempt}, version {})",
        decided.decision.rule(),
        decided.version
    );
    match &decided.decision {
        Decision::Retry { delay, .. } => format!("retry after {}  {tail}", DurationDisplay(*delay)),
        Decision::DeadLetter { label, reason, .. } => {
            format!("dead_letter {label}, reason {reason}  {tail}")
        }
    }
}
