//! `rebound explain`: the decision plus the trace of every rule considered, and the
//! arithmetic of its delay.

use super::failure::FailureArgs;
use crate::Outcome;

/// Print the decision, why each rule did or did not decide, and how the delay came about.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  rebound explain --code NET_TIMEOUT --attempt 5 --signal fail_rate=0.7\n\n\
The arithmetic lines show the backoff step, the value before jitter, the jitter range and\n\
the value drawn, the clamp, Retry-After and the max_elapsed check. Without --seed a seed is\n\
drawn and printed; 'rebound decide' with that --seed gives the same delay."
)]
pub struct Args {
    #[command(flatten)]
    failure: FailureArgs,
}

/// Prints the explanation; `Err` is the outcome to exit with when the rule set cannot be used.
pub fn run(args: Args) -> Result<Outcome, Outcome> {
    let f = &args.failure;
    // Seeded as `decide --seed` seeds, so the seed printed replays the same draw there.
    let seed = f.seed.unwrap_or_else(rand::random);
    let handle = f.policy()?;
    let failure = f.failure();
    let ctx = failure.context();
    let explained = handle.explain(&ctx, &mut rebound_engine::backoff::jitter_rng(seed));
    let set = handle.current();
    if f.json {
        let mut doc = serde_json::json!({
            "decision": explained.decided.report(f.attempt),
            "trace": explained.trace,
            "note": explained.defaults_note,
            "seed": seed,
            "pacing": explained.pacing,
        });
        for (key, value) in rebound::falls_under::keys(&set, &ctx) {
            doc[key] = value;
        }
        println!("{doc}");
        return Ok(Outcome::Ok);
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
    if let Some(line) = rebound::falls_under::line(&set, &ctx) {
        println!("{line}");
    }
    if let Some(pacing) = &explained.pacing {
        let given = if f.seed.is_some() {
            String::new()
        } else {
            format!(", drawn at random; --seed {seed} replays it")
        };
        println!(
            "arithmetic ({}, seed {seed}{given}):",
            explained.decided.decision.rule()
        );
        for line in pacing.to_string().lines() {
            println!("  {line}");
        }
    }
    Ok(Outcome::Ok)
}
