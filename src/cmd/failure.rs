//! The flags that describe a failure, shared by `decide` and `explain`.

use crate::Outcome;
use rebound_engine::duration::parse_duration;
use rebound_engine::wall_time::parse_rfc3339;
use rebound_engine::{OwnedFailure, PolicyHandle};
use std::path::PathBuf;
use std::time::Duration;

/// A failure to decide, as flags.
#[derive(clap::Args, Debug)]
pub struct FailureArgs {
    /// The rule set directory.
    #[arg(long, default_value = "rules")]
    pub rules: PathBuf,
    /// Business type of the failed message.
    #[arg(long, default_value = "")]
    pub biz: String,
    /// Error code of the failure.
    #[arg(long, default_value = "")]
    pub code: String,
    /// The attempt that just failed (1 for the first delivery).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt: u32,
    /// How many times the message has been redriven from a dead-letter label.
    #[arg(long, default_value = "0")]
    pub redrives: u32,
    /// Time since the first delivery began (e.g. 1.5s, 2m, 250ms; a bare number is ms).
    #[arg(long, value_parser = duration, default_value = "0")]
    pub elapsed: Duration,
    /// A delay the failure asks for (HTTP 429 Retry-After).
    #[arg(long, value_parser = duration)]
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt.
    #[arg(long, value_parser = duration, default_value = "0")]
    pub last_delay: Duration,
    /// A string attribute of the failure, as KEY=VALUE (repeatable).
    #[arg(long = "attr", value_parser = key_value)]
    pub attrs: Vec<(String, String)>,
    /// A header of the failed message, as KEY=VALUE (repeatable), e.g. tenant=vip.
    #[arg(long = "header", value_name = "K=V", value_parser = header)]
    pub headers: Vec<(String, String)>,
    /// When the failure happened, as RFC 3339 (e.g. 2026-01-05T08:30:00+01:00); default: now.
    #[arg(long, value_name = "RFC3339", value_parser = now)]
    pub now: Option<u64>,
    /// A runtime signal, as KEY=NUMBER (repeatable), e.g. fail_rate=0.7.
    #[arg(long = "signal", value_parser = signal)]
    pub signals: Vec<(String, f64)>,
    /// Seed for jitter, to make the decision reproducible.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got '{s}'"))
}

fn header(s: &str) -> Result<(String, String), String> {
    match key_value(s)? {
        (k, _) if k.is_empty() => Err(format!("expected NAME=VALUE with a name, got '{s}'")),
        kv => Ok(kv),
    }
}

fn now(s: &str) -> Result<u64, String> {
    parse_rfc3339(s).map_err(|e| e.to_string())
}

fn signal(s: &str) -> Result<(String, f64), String> {
    let (k, v) = key_value(s)?;
    let v = v
        .parse::<f64>()
        .map_err(|_| format!("expected KEY=NUMBER, got '{s}'"))?;
    Ok((k, v))
}

impl FailureArgs {
    /// The rule set of `--rules`, ready to decide. One that cannot be used is printed as
    /// `check` prints it, and `Err` holds the outcome to exit with.
    pub fn policy(&self) -> Result<PolicyHandle, Outcome> {
        let (set, _) = super::load_rules(&self.rules, self.json)?;
        Ok(PolicyHandle::new(set))
    }

    /// The failure the flags describe, for [`OwnedFailure::context`].
    pub fn failure(&self) -> OwnedFailure {
        OwnedFailure {
            biz: self.biz.clone(),
            code: self.code.clone(),
            attempt: self.attempt,
            redrives: self.redrives,
            elapsed: self.elapsed,
            retry_after: self.retry_after,
            last_delay: self.last_delay,
            attrs: self.attrs.iter().cloned().collect(),
            headers: self.headers.iter().cloned().collect(),
            now: self
                .now
                .unwrap_or_else(rebound_engine::wall_time::system_now),
            signals: self.signals.iter().cloned().collect(),
        }
    }

    /// The RNG for jitter: seeded when asked, else from the OS.
    pub fn rng(&self) -> rebound_engine::backoff::JitterRng {
        match self.seed {
            Some(seed) => rebound_engine::backoff::jitter_rng(seed),
            None => rebound_engine::backoff::jitter_rng(rand::random()),
        }
    }
}
