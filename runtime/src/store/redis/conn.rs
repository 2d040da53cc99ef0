//! The connection: a [`ConnectionManager`] driven by a runtime of the store's own, blocking
//! calls on top of it, the start-up checks, and the URL with its password kept out of sight.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisError, RedisResult};

use crate::store::{Result, StoreError};

/// How to reach the shared store.
#[derive(Clone)]
pub struct RedisOptions {
    /// `redis://[USER:PASSWORD@]HOST:PORT[/DB]` (kept secret: never printed).
    pub url: String,
    /// Every key begins with `{NAMESPACE}:`.
    pub namespace: String,
    /// How long one command may take before it counts as failed (its outcome is then
    /// unknown, and the caller runs it again: every script is safe to run twice). Default 5 s:
    /// `appendfsync always` on a slow disk makes a large batch wait for an fsync.
    pub response_timeout: Duration,
    /// How long the first connection, and each reconnection attempt, may take. Default 2 s.
    pub connect_timeout: Duration,
}

impl RedisOptions {
    /// Options for `url` and `namespace` with the default timeouts.
    pub fn new(url: impl Into<String>, namespace: impl Into<String>) -> RedisOptions {
        RedisOptions {
            url: url.into(),
            namespace: namespace.into(),
            response_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
        }
    }
}

impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &redacted(&self.url))
            .field("namespace", &self.namespace)
            .field("response_timeout", &self.response_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// `url` without its user and password: `redis://HOST:PORT/DB`, or `redis://…` if it does
/// not parse (the text itself is never shown: it may hold a password).
pub(crate) fn redacted(url: &str) -> String {
    match url.into_connection_info() {
        Ok(info) => {
            let db = info.redis_settings().db();
            match info.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    format!("redis://{host}:{port}/{db}")
                }
                ConnectionAddr::Unix(path) => format!("redis+unix://{}?db={db}", path.display()),
                _ => "redis://…".to_owned(),
            }
        }
        Err(_) => "redis://…".to_owned(),
    }
}

/// The blocking face of the connection. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Io {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: tokio::runtime::Runtime,
    conn: ConnectionManager,
    location: String,
    round_trips: AtomicU64,
}

impl Io {
    pub(crate) fn connect(options: &RedisOptions) -> Result<Io> {
        let location = format!("{} namespace {}", redacted(&options.url), options.namespace);
        let fail = |op: &'static str, e: RedisError| StoreError::redis(op, &location, &e);
        let client = redis::Client::open(options.url.as_str()).map_err(|e| fail("open", e))?;
        // One worker: it drives the connection while blocking callers wait on a channel.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rebound-redis")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Redis {
                op: "start",
                location: location.clone(),
                detail: e.to_string(),
                unreachable: false,
            })?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(options.response_timeout))
            .set_connection_timeout(Some(options.connect_timeout))
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(2))
            .set_number_of_retries(usize::MAX / 2);
        let conn = runtime
            .block_on(ConnectionManager::new_with_config(client, config))
            .map_err(|e| fail("connect", e))?;
        Ok(Io {
            inner: Arc::new(Inner {
                runtime,
                conn,
                location,
                round_trips: AtomicU64::new(0),
            }),
        })
    }

    /// `redis://HOST:PORT/DB namespace NS`: no password.
    pub(crate) fn location(&self) -> &str {
        &self.inner.location
    }

    /// Round trips made so far (each script call, command or pipeline is one).
    pub(crate) fn round_trips(&self) -> u64 {
        self.inner.round_trips.load(Relaxed)
    }

    /// A handle on the connection, for async callers (it reconnects by itself).
    #[allow(
        dead_code,
        reason = "for the durable layer's async callers, not yet written"
    )]
    pub(crate) fn connection(&self) -> ConnectionManager {
        self.inner.conn.clone()
    }

    /// Runs one round trip `f` on the store's runtime and waits for it. Callable from any
    /// thread, async ones included (it blocks that thread, so async code should not).
    pub(crate) fn run<T, F>(
        &self,
        op: &'static str,
        f: impl FnOnce(ConnectionManager) -> F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = RedisResult<T>> + Send + 'static,
    {
        self.inner.round_trips.fetch_add(1, Relaxed);
        let fut = f(self.inner.conn.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.inner.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let result = rx.recv().map_err(|_| StoreError::Redis {
            op,
            location: self.inner.location.clone(),
            detail: "the store's connection task stopped".into(),
            unreachable: true,
        })?;
        result.map_err(|e| StoreError::redis(op, &self.inner.location, &e))
    }

    pub(crate) fn ping(&self) -> bool {
        self.run("ping", |mut c| async move {
            redis::cmd("PING").query_async::<String>(&mut c).await
        })
        .is_ok()
    }

    pub(crate) fn check_server(&self) -> Result<ServerCheck> {
        let info: String = self.run("info", |mut c| async move {
            redis::cmd("INFO").arg("server").query_async(&mut c).await
        })?;
        let version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("")
            .trim()
            .to_owned();
        let config = |name: &'static str| {
            self.run("config get", move |mut c| async move {
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg(name)
                    .query_async::<Vec<String>>(&mut c)
                    .await
            })
            .ok()
            .and_then(|pair| pair.into_iter().nth(1))
        };
        let appendonly = config("appendonly");
        let maxmemory_policy = config("maxmemory-policy");
        Ok(ServerCheck {
            version,
            appendonly,
            maxmemory_policy,
        })
    }
}

/// What the start-up checks read off the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCheck {
    /// `redis_version` from `INFO server`.
    pub version: String,
    /// `CONFIG GET appendonly`, or `None` if the server refuses `CONFIG GET` (managed
    /// services often do).
    pub appendonly: Option<String>,
    /// `CONFIG GET maxmemory-policy`, or `None` likewise.
    pub maxmemory_policy: Option<String>,
}

/// A server setting the shared store cannot trust, and what it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerProblem {
    /// The setting (`redis_version`, `appendonly`, `maxmemory-policy`).
    pub setting: &'static str,
    /// What the server has.
    pub found: String,
    /// What the shared store needs.
    pub needed: &'static str,
}

impl std::fmt::Display for ServerProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the Redis server has {} {}; the shared store needs {} {}",
            self.setting, self.found, self.setting, self.needed
        )
    }
}

impl ServerCheck {
    /// The settings that make the server unfit to hold durable state: a version below 7.0,
    /// `appendonly no`, a `maxmemory-policy` other than `noeviction`.
    pub fn problems(&self) -> Vec<ServerProblem> {
        let mut problems = Vec::new();
        let major = self
            .version
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        if major.is_none_or(|m| m < 7) {
            problems.push(ServerProblem {
                setting: "redis_version",
                found: if self.version.is_empty() {
                    "unknown".into()
                } else {
                    self.version.clone()
                },
                needed: "7.0 or later",
            });
        }
        if let Some(a) = &self.appendonly
            && a != "yes"
        {
            problems.push(ServerProblem {
                setting: "appendonly",
                found: a.clone(),
                needed: "yes",
            });
        }
        if let Some(p) = &self.maxmemory_policy
            && p != "noeviction"
        {
            problems.push(ServerProblem {
                setting: "maxmemory-policy",
                found: p.clone(),
                needed: "noeviction",
            });
        }
        problems
    }

    /// True if the server refused `CONFIG GET` (the settings could not be checked).
    pub fn config_hidden(&self) -> bool {
        self.appendonly.is_none() || self.maxmemory_policy.is_none()
    }
}
