//! `rebound`: the command line. Each subcommand parses its flags, calls the engine or the
//! product library (`rebound::app` for `run` and `serve`), and prints the result; the logic
//! lives in the libraries.
#![forbid(unsafe_code)]

mod cmd;
mod diagnostics;

use clap::{Parser, Subcommand};
use rebound::Outcome;
use std::convert::identity;
use std::process::ExitCode;

/// mimalloc: the runtime hands small allocations (tuples, batches, messages) from one worker
/// thread to another, where glibc's malloc contends on its arenas. Measured with
/// `cargo bench -p rebound-runtime --bench pipeline`, it more than doubles the topology's
/// throughput.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// No `help` subcommand: every subcommand listed must answer `--help` with an example
// (cli.md), and `rebound help --help` cannot. `rebound SUBCOMMAND --help` is the way.
/// Declarative retry decisions for a Storm-style stream runtime.
#[derive(Parser)]
#[command(
    name = "rebound",
    version,
    about,
    propagate_version = true,
    disable_help_subcommand = true,
    after_help = "Examples:\n  \
    rebound check --rules rules --strict\n  \
    rebound decide --biz PAYMENT --code PAY_PROCESSING --attempt 1 --json\n  \
    rebound test && rebound paths\n  \
    rebound run --messages 20000\n\n\
    Each subcommand's --help shows its flags and an example."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Check(cmd::check::Args),
    Decide(cmd::decide::Args),
    Explain(cmd::explain::Args),
    Test(cmd::test::Args),
    Fmt(cmd::fmt::Args),
    Paths(cmd::paths::Args),
    Schema(cmd::schema::Args),
    Run(cmd::run::Args),
    Serve(cmd::serve::Args),
    Relay(cmd::relay::Args),
    Whatif(cmd::whatif::Args),
}

fn main() -> ExitCode {
    // Before any HTTP client is built (the rules puller's too): see the function.
    rebound::outbound::use_ring_by_default();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check(args) => cmd::check::run(args),
        Command::Decide(args) => cmd::decide::run(args).unwrap_or_else(identity),
        Command::Explain(args) => cmd::explain::run(args).unwrap_or_else(identity),
        Command::Test(args) => cmd::test::run(args),
        Command::Fmt(args) => cmd::fmt::run(args),
        Command::Paths(args) => cmd::paths::run(args),
        Command::Schema(args) => cmd::schema::run(args),
        Command::Run(args) => cmd::run::run(args).unwrap_or_else(identity),
        Command::Serve(args) => cmd::serve::run(args).unwrap_or_else(identity),
        Command::Relay(args) => cmd::relay::run(args).unwrap_or_else(identity),
        Command::Whatif(args) => cmd::whatif::run(args).unwrap_or_else(identity),
    };
    match outcome {
        Outcome::Ok => ExitCode::SUCCESS,
        Outcome::Wrong => ExitCode::from(1),
        Outcome::Trouble => ExitCode::from(2),
    }
}
