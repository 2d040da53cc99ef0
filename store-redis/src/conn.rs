//! The connection: a [`ConnectionManager`] driven by a runtime of the store's own, blocking
//! calls on top of it, the start-up checks, and the URL with its password kept out of sight.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisError, RedisResult};

use rebound_runtime::store::{Result, StoreError};

/// The store's name in its errors: the first word of their message, their
/// [`kind`](StoreError::kind) when the server answered.
pub(crate) const BACKEND: &str = "redis";

/// `e`, the failure of `op` on the store at `location`, as a [`StoreError::Backend`]: unreachable
/// if the server could not be reached (refused, dropped, timed out).
pub(crate) fn redis_error(op: &'static str, location: &str, e: &RedisError) -> StoreError {
    StoreError::Backend {
        backend: BACKEND,
        op,
        location: location.to_owned(),
        detail: e.to_string(),
        unreachable: e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal(),
    }
}

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
    /// The password, when it is not in the URL (from an environment variable or a file, so
    /// that `ps` does not show it). Never printed.
    pub password: Option<String>,
}

impl RedisOptions {
    /// Options for `url` and `namespace` with the default timeouts.
    pub fn new(url: impl Into<String>, namespace: impl Into<String>) -> RedisOptions {
        RedisOptions {
            url: url.into(),
            namespace: namespace.into(),
            response_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            password: None,
        }
    }

    /// Where to connect: the URL, with the password given apart if there is one.
    fn connection_info(&self) -> redis::RedisResult<redis::ConnectionInfo> {
        let info = self.url.as_str().into_connection_info()?;
        Ok(match &self.password {
            None => info,
            Some(password) => {
                let redis = info.redis_settings().clone().set_password(password);
                info.set_redis_settings(redis)
            }
        })
    }
}

/// Whether `url` carries a password of its own (`redis://:PASSWORD@…` or
/// `redis://USER:PASSWORD@…`); false if it does not parse.
pub fn url_has_password(url: &str) -> bool {
    url.into_connection_info()
        .is_ok_and(|info| info.redis_settings().password().is_some())
}

impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &redacted(&self.url))
            .field("namespace", &self.namespace)
            .field("response_timeout", &self.response_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("password", &self.password.as_ref().map(|_| "…"))
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

/// Checks that `url` is a Redis URL this store can use. The error never repeats the URL (it
/// may hold a password).
pub fn check_url(url: &str) -> std::result::Result<(), String> {
    url.into_connection_info()
        .map(drop)
        .map_err(|e| format!("not a usable Redis URL: {}", e.category()))
}

/// The blocking face of the connection. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Io {
    inner: Arc<Inner>,
}

struct Inner {
    /// Always `Some` until dropped (taken there, to shut down without blocking).
    runtime: Option<tokio::runtime::Runtime>,
    conn: ConnectionManager,
    /// The longest one call may take, reconnecting included.
    deadline: Duration,
    location: String,
    round_trips: AtomicU64,
    errors: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl Io {
    pub(crate) fn connect(options: &RedisOptions) -> Result<Io> {
        let location = format!("{} namespace {}", redacted(&options.url), options.namespace);
        let fail = |op: &'static str, e: RedisError| crate::conn::redis_error(op, &location, &e);
        let client = options
            .connection_info()
            .and_then(redis::Client::open)
            .map_err(|e| fail("open", e))?;
        // One worker: it drives the connection while blocking callers wait on a channel.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rebound-redis")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Backend {
                backend: BACKEND,
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
        // The first connection: a server that is not there (refused) is an error at start; one
        // that is there but slow to answer (a long fsync, loading its AOF) is tried again
        // within STARTUP_WITHIN. After that, the manager reconnects for as long as it takes,
        // and every call is bounded by `Io::run`'s deadline.
        let until = Instant::now() + STARTUP_WITHIN;
        loop {
            let pinged = client
                .get_connection_with_timeout(options.connect_timeout)
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            match pinged {
                Ok(_) => break,
                Err(e) if slow(&e) && Instant::now() < until => std::thread::sleep(RETRY_EVERY),
                Err(e) if slow(&e) => return Err(late(&location, &e.to_string())),
                Err(e) => return Err(fail("connect", e)),
            }
        }
        // Made on the store's runtime (whose worker drives it from now on), waited for on a
        // channel: `connect` may be called from async code too.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let within = options.connect_timeout + options.response_timeout;
        runtime.spawn(async move {
            let made =
                tokio::time::timeout(within, ConnectionManager::new_with_config(client, config))
                    .await;
            let _ = tx.send(made);
        });
        let conn = rx
            .recv()
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| StoreError::Backend {
                backend: BACKEND,
                op: "connect",
                location: location.clone(),
                detail: "no connection within the connect timeout".into(),
                unreachable: true,
            })?
            .map_err(|e| fail("connect", e))?;
        Ok(Io {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                conn,
                deadline: options.connect_timeout + options.response_timeout,
                location,
                round_trips: AtomicU64::new(0),
                errors: Default::default(),
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
        let deadline = self.inner.deadline;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.inner
            .runtime
            .as_ref()
            .expect("the store's runtime lives until it is dropped")
            .spawn(async move {
                let _ = tx.send(tokio::time::timeout(deadline, fut).await);
            });
        let unreachable = |detail: String| StoreError::Backend {
            backend: BACKEND,
            op,
            location: self.inner.location.clone(),
            detail,
            unreachable: true,
        };
        let result = match rx.recv() {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => {
                let e = unreachable(format!("no answer within {deadline:?}"));
                self.count(&e);
                return Err(e);
            }
            Err(_) => return Err(unreachable("the store's connection task stopped".into())),
        };
        result.map_err(|e| {
            let e = crate::conn::redis_error(op, &self.inner.location, &e);
            self.count(&e);
            e
        })
    }

    fn count(&self, e: &StoreError) {
        *self
            .inner
            .errors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(e.kind())
            .or_default() += 1;
    }

    /// Failed round trips so far, by [`StoreError::kind`].
    pub(crate) fn errors(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.inner
            .errors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// True if the server answers a `PING` within `within`.
    pub(crate) fn ping(&self, within: Duration) -> bool {
        let fut = {
            let mut c = self.inner.conn.clone();
            async move { redis::cmd("PING").query_async::<String>(&mut c).await }
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if let Some(rt) = &self.inner.runtime {
            rt.spawn(async move {
                let _ = tx.send(tokio::time::timeout(within, fut).await);
            });
        }
        matches!(rx.recv(), Ok(Ok(Ok(_))))
    }

    /// Reads what the start-up checks need, trying again within [`STARTUP_WITHIN`] while the
    /// server does not answer in time (a long fsync stalls it: that is not a refusal).
    pub(crate) fn check_server(&self) -> Result<ServerCheck> {
        let until = Instant::now() + STARTUP_WITHIN;
        loop {
            match self.read_server() {
                Ok(check) => return Ok(check),
                Err(e) if e.is_unreachable() && Instant::now() < until => {
                    std::thread::sleep(RETRY_EVERY);
                }
                Err(StoreError::Backend {
                    backend: BACKEND,
                    unreachable: true,
                    detail,
                    ..
                }) => return Err(late(&self.inner.location, &detail)),
                Err(e) => return Err(e),
            }
        }
    }

    fn read_server(&self) -> Result<ServerCheck> {
        let info: String = self.run("info", |mut c| async move {
            redis::cmd("INFO").arg("server").query_async(&mut c).await
        })?;
        let version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("")
            .trim()
            .to_owned();
        // A server that refuses CONFIG GET (managed services often do) answers with an error:
        // the setting is unknown (`None`). One that does not answer in time is an error.
        let config = |name: &'static str| -> Result<Option<String>> {
            let got = self.run("config get", move |mut c| async move {
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg(name)
                    .query_async::<Vec<String>>(&mut c)
                    .await
            });
            match got {
                Ok(pair) => Ok(pair.into_iter().nth(1)),
                Err(e) if e.is_unreachable() => Err(e),
                Err(_) => Ok(None),
            }
        };
        Ok(ServerCheck {
            version,
            appendonly: config("appendonly")?,
            appendfsync: config("appendfsync")?,
            maxmemory_policy: config("maxmemory-policy")?,
        })
    }
}

/// How long a node's start waits for a server that is there but does not answer in time
/// (the first connection and the start-up checks).
pub const STARTUP_WITHIN: Duration = Duration::from_secs(10);

/// How often the start tries such a server again.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// True if `e` says the server is there but slow: a timeout (a blocking read's timeout is
/// `EAGAIN`, "Resource temporarily unavailable"), or the server loading its data.
fn slow(e: &RedisError) -> bool {
    e.is_timeout() || e.code() == Some("LOADING")
}

/// The start-up's error for a server that did not answer within [`STARTUP_WITHIN`].
fn late(location: &str, detail: &str) -> StoreError {
    StoreError::Backend {
        backend: BACKEND,
        op: "start-up checks",
        location: location.to_owned(),
        detail: format!(
            "the store did not answer the start-up checks within {} s (is it stalled on a slow \
             disk, or loading its data?): {detail}",
            STARTUP_WITHIN.as_secs()
        ),
        unreachable: true,
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle may go from inside an async task: never block there.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
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
    /// `CONFIG GET appendfsync`, or `None` likewise.
    pub appendfsync: Option<String>,
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

    /// The settings that weaken what the shared store promises without making it unfit:
    /// `appendfsync` other than `always` (Redis then answers a write before it is on disk,
    /// so a crash of the server's machine loses up to a second of acknowledged writes).
    /// Warned about at start, never refused.
    pub fn warnings(&self) -> Vec<ServerProblem> {
        match &self.appendfsync {
            Some(f) if f != "always" => vec![ServerProblem {
                setting: "appendfsync",
                found: format!("{f} (a crash of its machine can lose acknowledged writes)"),
                needed: "always",
            }],
            _ => Vec::new(),
        }
    }

    /// True if the server refused `CONFIG GET` (the settings could not be checked).
    pub fn config_hidden(&self) -> bool {
        self.appendonly.is_none() || self.appendfsync.is_none() || self.maxmemory_policy.is_none()
    }
}
