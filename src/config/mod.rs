//! The configuration file of `rebound run` and `rebound serve` (`--config FILE`,
//! `docs/spec/operations.md`, "The configuration file").
//!
//! Every key is optional and a flag given on the command line wins over the file; the
//! commands do that merge (`src/cmd/`), this module only reads the file. It is read by the
//! engine's YAML diagnostics ([`deserialize_yaml`]) as rule files are: unknown keys, bad
//! durations and bad values are `FILE:LINE:COL: error: …` diagnostics with "did you mean" for
//! a misspelt key. Values are checked while they are read (`parse.rs`), so a file that loads
//! holds only values the process can start with (an address is resolved and a token file read
//! at start, not here; a receiver's `ca_file` is read here, so that a bad one is an error at
//! its place in the file).
//!
//! Relative paths (`rules`, `data`, `admin.token_file`, a receiver's `ca_file`) are relative
//! to the working directory, as the flags they stand for are.
//!
//! [`deserialize_yaml`]: rebound_engine::load::deserialize_yaml

mod parse;
mod publish;
mod receivers;
mod relay;
mod topology;

pub use parse::HostName;
pub use publish::{DeadLettersSetting, PublishUrl, PublishUrlError, redact as redact_url};
pub use receivers::{PAYLOAD_AT_MOST, Receiver, ReceiverKind, Receivers, undefined_receivers};
pub use relay::{
    Fields, HandlerSetting, SourceSetting, SourceUrl, SourceUrlError, check_handler_url,
};
pub use topology::{Drain, EXIT_SHARE, Fuse, StopBounds, Topology};

use rebound_engine::{Diagnostic, SourceFile};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a configuration file says. Every field is optional: `None` (or an empty section)
/// leaves the command's flag or default in force.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `--rules`: the rule set directory.
    #[serde(default)]
    pub rules: Option<PathBuf>,
    /// `--data`: the data directory.
    #[serde(default)]
    pub data: Option<PathBuf>,
    /// `--store`: `sqlite` or a `redis://` URL (checked to parse), and where its password is.
    #[serde(default, deserialize_with = "parse::store")]
    pub store: Option<StoreSetting>,
    /// `--namespace`: the prefix of every key on a shared store.
    #[serde(default, deserialize_with = "parse::namespace")]
    pub namespace: Option<String>,
    /// `--node`: this process's name in the fleet.
    #[serde(default, deserialize_with = "parse::name")]
    pub node: Option<String>,
    /// `--lease`: how long a claim stays this node's without renewal.
    #[serde(default, deserialize_with = "parse::duration")]
    pub lease: Option<Duration>,
    /// `--store-check`: what to do with a Redis unfit to hold durable state.
    #[serde(default)]
    pub store_check: Option<StoreCheckSetting>,
    /// `--store-give-up`: how long a store that refuses every write is retried.
    #[serde(default, deserialize_with = "parse::duration")]
    pub store_give_up: Option<Duration>,
    /// `--time-scale`: the rules' delays and the message timeout run this many times faster.
    #[serde(default, deserialize_with = "parse::positive")]
    pub time_scale: Option<f64>,
    /// `--messages` (`run` only; `serve` generates orders until stopped).
    #[serde(default, deserialize_with = "parse::count")]
    pub messages: Option<u64>,
    /// `--rate` (`serve` only): new orders per second at most.
    #[serde(default, deserialize_with = "parse::positive")]
    pub rate: Option<f64>,
    /// `--admin` and `--token-file`.
    #[serde(default, deserialize_with = "parse::section")]
    pub admin: Admin,
    /// The bundled topology's runtime settings (no flags stand for them).
    #[serde(default, deserialize_with = "parse::section")]
    pub topology: Topology,
    /// Where `alert:` labels send their dead letters.
    #[serde(default)]
    pub receivers: Receivers,
    /// `relay`'s source: `--source` and how a message's parts are found.
    #[serde(default)]
    pub source: Option<SourceSetting>,
    /// `relay`'s handler: `--handler`, its timeout, concurrency and CA file.
    #[serde(default, deserialize_with = "parse::section")]
    pub handler: HandlerSetting,
    /// `relay`'s dead letters: `publish`, where each stored one is also published.
    #[serde(default, deserialize_with = "parse::section")]
    pub dead_letters: DeadLettersSetting,
    /// The decision log (`release.md`): how much of it is sampled and kept.
    #[serde(default, deserialize_with = "parse::section")]
    pub decisions: Decisions,
}

/// `decisions:`: the decision log's sample and bound; `None` keeps the default (100%,
/// 100,000 entries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decisions {
    /// The share of decisions recorded: `100%`, `10%`, `0%` (none), or 0–1.
    #[serde(default, deserialize_with = "parse::sample")]
    pub sample: Option<f64>,
    /// The newest entries the store keeps.
    #[serde(default, deserialize_with = "parse::count")]
    pub keep: Option<u64>,
}

impl Decisions {
    /// `options` with what this section sets.
    pub fn apply(
        &self,
        options: rebound_runtime::release::LogOptions,
    ) -> rebound_runtime::release::LogOptions {
        rebound_runtime::release::LogOptions {
            sample: self.sample.unwrap_or(options.sample),
            keep: self.keep.unwrap_or(options.keep),
        }
    }
}

/// `store:`: the URL, alone or with the file its password is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSetting {
    /// `sqlite` or a `redis://` URL.
    pub url: String,
    /// `store.password_file`: a file holding the Redis password (so that it is not in the
    /// URL, which `ps` shows); relative to the working directory.
    pub password_file: Option<PathBuf>,
}

/// The `admin:` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    /// `--admin`: where the admin API listens, `HOST:PORT`.
    #[serde(default, deserialize_with = "parse::host_port")]
    pub addr: Option<String>,
    /// `--token-file`: the file holding the token that writes need.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// How many connections may be open at once (512 when unset); the next is refused.
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub max_connections: Option<usize>,
    /// Host names the admin API answers to besides its address, `localhost`, `127.0.0.1`
    /// and `[::1]` (a request for another `Host` gets 421).
    #[serde(default)]
    pub hosts: Vec<parse::HostName>,
    /// How long a request's headers may take to arrive (10 s when unset).
    #[serde(default, deserialize_with = "parse::duration")]
    pub header_timeout: Option<Duration>,
    /// How long a request's body may take to arrive (30 s when unset).
    #[serde(default, deserialize_with = "parse::duration")]
    pub body_timeout: Option<Duration>,
    /// How long an idle keep-alive connection stays open (60 s when unset).
    #[serde(default, deserialize_with = "parse::duration")]
    pub idle_timeout: Option<Duration>,
}

/// `store_check:` as the file writes it (`--store-check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreCheckSetting {
    /// Refuse to start on a Redis unfit to hold durable state.
    Refuse,
    /// Warn and start anyway.
    Warn,
}

/// Why a configuration file cannot be used.
#[derive(Debug)]
pub enum ConfigError {
    /// It cannot be read (exit 2).
    Io {
        /// The file as named.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// It is wrong: every problem found, with the file's text to show them against.
    Rejected {
        /// `FILE:LINE:COL` diagnostics, never empty.
        diagnostics: Vec<Diagnostic>,
        /// The file, for source excerpts.
        source: SourceFile,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Io { path, error } => {
                write!(
                    f,
                    "cannot read the configuration {}: {error}",
                    path.display()
                )
            }
            ConfigError::Rejected { diagnostics, .. } => {
                let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
                f.write_str(&lines.join("\n"))
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigFile {
    /// Reads and checks the configuration file at `path`.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let bytes = std::fs::read(path).map_err(|error| ConfigError::Io {
            path: path.to_owned(),
            error,
        })?;
        let shown = path.display().to_string();
        let source = SourceFile::new(shown.clone(), shown, bytes);
        ConfigFile::parse(&source).map_err(|diagnostics| ConfigError::Rejected {
            diagnostics,
            source,
        })
    }

    /// Reads a configuration from `file`'s bytes; diagnostics name `file.path`. A file with
    /// nothing but comments is an empty configuration.
    pub fn parse(file: &SourceFile) -> Result<ConfigFile, Vec<Diagnostic>> {
        let text = rebound_engine::load::utf8_text(file).map_err(|d| vec![d])?;
        let blank = text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if blank {
            return Ok(ConfigFile::default());
        }
        rebound_engine::load::deserialize_yaml(&file.path, text)
    }
}

#[cfg(test)]
mod tests;
