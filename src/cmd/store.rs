//! The store flags `run` and `serve` share (`docs/spec/scale-out.md`, "Starting a node"):
//! `--store`, `--namespace`, `--node`, `--lease`, `--store-check`, each over its key in the
//! configuration file.

use super::duration;
use crate::Outcome;
use rebound::config::{ConfigFile, StoreCheckSetting};
use rebound::pipeline::{FleetOptions, StoreCheck};
use rebound_store_redis::RedisOptions;
use std::time::Duration;

/// What `--store-check` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckArg {
    /// Refuse to start (exit 2) on a Redis unfit to hold durable state.
    Refuse,
    /// Warn on stderr and start anyway.
    Warn,
}

/// Where the durable state lives. Each flag wins over its key in `--config`.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// `sqlite`: the embedded file in --data. `redis://[USER:PASSWORD@]HOST:PORT[/DB]`: a
    /// store shared by several nodes [default: sqlite].
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Every key this deployment writes begins with `{NS}:` (two deployments on one Redis use
    /// two namespaces) [default: rebound].
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// This process's name in the fleet (default HOSTNAME-PID); a second live process with
    /// the same name is refused.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// How long a claimed retry or an owned source partition stays this node's without
    /// renewal (real time, never scaled by --time-scale) [default: 10s].
    #[arg(long, value_name = "DUR", value_parser = duration)]
    lease: Option<Duration>,
    /// What to do with a Redis below 7.0, without `appendonly yes`, or with a
    /// `maxmemory-policy` other than `noeviction` [default: refuse].
    #[arg(long, value_enum)]
    store_check: Option<CheckArg>,
}

impl StoreArgs {
    /// The flags of a command that only reads a store (`whatif`): `--store` and
    /// `--namespace`, the rest at their defaults.
    pub fn reader(store: String, namespace: Option<String>) -> StoreArgs {
        StoreArgs {
            store: Some(store),
            namespace,
            node: None,
            lease: None,
            store_check: None,
        }
    }

    /// This node's name at a broker (`--node`, else the file's `node`, else the machine's
    /// name: the same across restarts, so a restarted relay finds its own pending entries),
    /// or why a given one is refused.
    pub fn consumer(&self, file: &ConfigFile) -> Result<String, Outcome> {
        match self.node.as_ref().or(file.node.as_ref()) {
            Some(n) if n.trim().is_empty() => {
                eprintln!("error: --node must not be blank");
                Err(Outcome::Trouble)
            }
            Some(n) => Ok(n.trim().to_owned()),
            None => Ok(hostname()),
        }
    }

    /// `--lease`, else the file's, else 10 s.
    pub fn lease(&self, file: &ConfigFile) -> Duration {
        self.lease.or(file.lease).unwrap_or(Duration::from_secs(10))
    }

    /// The fleet these flags (else `file`'s keys) join, or `None` for the embedded store; a
    /// bad flag is printed (never the URL itself: it may hold a password) and exits 2.
    pub fn fleet(&self, file: &ConfigFile) -> Result<Option<FleetOptions>, Outcome> {
        let setting = file.store.as_ref();
        let store = self.store.as_deref().or(setting.map(|s| s.url.as_str()));
        let url = store.map_or("sqlite", |s| s.trim());
        if url == "sqlite" {
            return Ok(None);
        }
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            eprintln!(
                "error: --store: expected `sqlite` or `redis://[USER:PASSWORD@]HOST:PORT[/DB]`, got a value starting with `{}`",
                url.split("://")
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(16)
                    .collect::<String>()
            );
            return Err(Outcome::Trouble);
        }
        if let Err(e) = redis_url_ok(url) {
            eprintln!("error: --store: {e}");
            return Err(Outcome::Trouble);
        }
        let namespace = self
            .namespace
            .as_ref()
            .or(file.namespace.as_ref())
            .map_or("rebound", |n| n.as_str());
        let ns = namespace.trim();
        if ns.is_empty() || ns.contains(['{', '}']) || ns.chars().any(char::is_whitespace) {
            eprintln!(
                "error: --namespace: expected a name without braces or spaces, got {namespace:?}"
            );
            return Err(Outcome::Trouble);
        }
        let lease = self.lease.or(file.lease).unwrap_or(Duration::from_secs(10));
        if lease < Duration::from_millis(100) {
            eprintln!("error: --lease: at least 100ms, got {lease:?}");
            return Err(Outcome::Trouble);
        }
        let check = match (self.store_check, file.store_check) {
            (Some(CheckArg::Warn), _) | (None, Some(StoreCheckSetting::Warn)) => StoreCheck::Warn,
            _ => StoreCheck::Refuse,
        };
        let node = match self.node.as_ref().or(file.node.as_ref()) {
            Some(n) if n.trim().is_empty() => {
                eprintln!("error: --node must not be blank");
                return Err(Outcome::Trouble);
            }
            Some(n) => n.trim().to_owned(),
            None => format!("{}-{}", hostname(), std::process::id()),
        };
        let password = store_password(
            url,
            self.store.is_some(),
            setting.and_then(|s| s.password_file.as_deref()),
        )?;
        Ok(Some(FleetOptions {
            redis: RedisOptions {
                password,
                ..RedisOptions::new(url, ns)
            },
            node,
            lease,
            check,
        }))
    }
}

/// The environment variable that gives the Redis password.
pub const PASSWORD_ENV: &str = "REBOUND_STORE_PASSWORD";

/// The Redis password given apart from the URL: [`PASSWORD_ENV`], else the configuration's
/// `store.password_file` (its content, without the trailing line break). A password given
/// both in the URL and apart is refused (which one counts would be a guess); one in a URL on
/// the command line (`from_flag`) is warned about, as `ps` shows it to every user.
pub fn store_password(
    url: &str,
    from_flag: bool,
    password_file: Option<&std::path::Path>,
) -> Result<Option<String>, Outcome> {
    let from_env = std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty());
    let password = match (from_env, password_file) {
        (Some(p), _) => Some(p),
        (None, Some(path)) => Some(read_password_file(path)?),
        (None, None) => None,
    };
    let in_url = rebound_store_redis::url_has_password(url);
    if in_url && password.is_some() {
        eprintln!(
            "error: the store URL holds a password and {PASSWORD_ENV} or store.password_file gives one too; give it once, outside the URL"
        );
        return Err(Outcome::Trouble);
    }
    if in_url && from_flag {
        eprintln!(
            "warning: the --store URL holds a password, which `ps` shows to every user of this machine; give it in {PASSWORD_ENV} or the configuration's store.password_file instead"
        );
    }
    Ok(password)
}

fn read_password_file(path: &std::path::Path) -> Result<String, Outcome> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        eprintln!(
            "error: store.password_file {}: cannot read it: {e}",
            path.display()
        );
        Outcome::Trouble
    })?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        eprintln!(
            "error: store.password_file {}: the file is empty",
            path.display()
        );
        return Err(Outcome::Trouble);
    }
    Ok(password.to_owned())
}

/// Checks that the URL parses, without ever printing it (it may hold a password).
fn redis_url_ok(url: &str) -> Result<(), String> {
    rebound_store_redis::check_url(url)
}

/// The machine's name, for the default node name.
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "node".to_owned())
}
