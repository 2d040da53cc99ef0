//! What the relay tests run: the real `rebound relay` binary ([`Relay`]) and a handler of the
//! test's own ([`HandlerServer`]), an HTTP server on loopback that answers each delivery as the
//! test says and records what it was sent.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

pub use super::super::support::within;
use super::super::support::{DEADLINE, rebound};

/// One request the handler received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// Its body.
    pub body: String,
    /// The status it was answered with.
    pub status: u16,
}

impl Received {
    /// The header `name` (lower case), or "".
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

/// How the handler answers: status, extra headers, body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl Answer {
    /// 200, empty.
    pub fn ok() -> Answer {
        Answer::status(200)
    }
    /// `status`, empty.
    pub fn status(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }
    /// `status` with the JSON failure body `{"code": code}`.
    pub fn code(status: u16, code: &str) -> Answer {
        Answer {
            body: format!("{{\"code\":\"{code}\",\"message\":\"the test said so\"}}"),
            ..Answer::status(status)
        }
    }
    /// The same answer after `delay`.
    pub fn after(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }
}

type Decide = dyn Fn(&Received) -> Answer + Send + Sync;

/// A handler on `127.0.0.1:PORT` answering each request by `decide`; every request is
/// recorded. It stops when dropped.
pub struct HandlerServer {
    pub addr: SocketAddr,
    decide: Arc<Decide>,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HandlerServer {
    /// Starts it.
    pub fn start(decide: impl Fn(&Received) -> Answer + Send + Sync + 'static) -> HandlerServer {
        let received = Arc::new(Mutex::new(Vec::new()));
        let decide: Arc<Decide> = Arc::new(decide);
        let (addr, stop, thread) = Self::serve("127.0.0.1:0".parse().unwrap(), &decide, &received);
        HandlerServer {
            addr,
            decide,
            received,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Stops it (connections refused from now on) until [`HandlerServer::restart`].
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Starts it again on the same address, answering as before.
    pub fn restart(&mut self) {
        self.stop();
        let (_, stop, thread) = Self::serve(self.addr, &self.decide, &self.received);
        self.stop = Some(stop);
        self.thread = Some(thread);
    }

    fn serve(
        addr: SocketAddr,
        decide: &Arc<Decide>,
        received: &Arc<Mutex<Vec<Received>>>,
    ) -> (
        SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let decide = decide.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let log = received.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = loop {
                    // The port may take a moment to be free again after a stop.
                    match tokio::net::TcpListener::bind(addr).await {
                        Ok(l) => break l,
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                bound_tx.send(listener.local_addr().unwrap()).unwrap();
                let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
                    let (decide, log) = (decide.clone(), log.clone());
                    async move { answer(&*decide, &log, headers, body).await }
                });
                // A stop is abrupt, as a killed server's: the runtime goes, and with it every
                // connection and every request in flight.
                tokio::select! {
                    served = axum::serve(listener, app).into_future() => served.unwrap(),
                    _ = stopped => {}
                }
            });
        });
        let addr = bound_rx
            .recv_timeout(DEADLINE)
            .expect("the handler listens");
        (addr, stop, thread)
    }

    /// `http://127.0.0.1:PORT/orders`.
    pub fn url(&self) -> String {
        format!("http://{}/orders", self.addr)
    }

    /// Every request so far, in the order they arrived.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for HandlerServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn answer(
    decide: &Decide,
    log: &Mutex<Vec<Received>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let received = Received {
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
        status: 0,
    };
    let answer = decide(&received);
    let received = Received {
        status: answer.status,
        ..received
    };
    log.lock().unwrap().push(received);
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut out = HeaderMap::new();
    for (name, value) in answer.headers {
        out.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    let status = StatusCode::from_u16(answer.status).unwrap();
    (status, out, answer.body).into_response()
}

/// A `rebound relay` child process; killed when dropped.
pub struct Relay {
    child: Child,
    /// `http://127.0.0.1:PORT`, the admin API.
    pub base: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

fn collect(
    pipe: impl Read + Send + 'static,
    sink: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut lines = BufReader::new(pipe);
        let mut line = String::new();
        while lines.read_line(&mut line).unwrap_or(0) > 0 {
            sink.lock().unwrap().push_str(&line);
            line.clear();
        }
    })
}

impl Relay {
    /// Starts `rebound relay --rules RULES --data DATA --admin 127.0.0.1:0 EXTRA…` and waits
    /// for its address line.
    pub fn start(rules: &Path, data: &Path, extra: &[&str]) -> Relay {
        let mut cmd = rebound();
        cmd.arg("relay")
            .arg("--rules")
            .arg(rules)
            .arg("--data")
            .arg(data)
            .args(["--admin", "127.0.0.1:0"])
            .args(extra)
            .env_remove("REBOUND_ADMIN_TOKEN")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("rebound relay starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), stdout.clone()),
            collect(child.stderr.take().unwrap(), stderr.clone()),
        ];
        let end = Instant::now() + DEADLINE * 3;
        let addr = loop {
            let out = stdout.lock().unwrap().clone();
            if let Some(line) = out.lines().find(|l| l.starts_with("listening on ")) {
                break line["listening on ".len()..].trim().to_owned();
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "relay exited ({status}) before listening:\n{}",
                    stderr.lock().unwrap()
                );
            }
            assert!(Instant::now() < end, "relay did not print its address");
            std::thread::sleep(Duration::from_millis(20));
        };
        Relay {
            child,
            base: format!("http://{addr}"),
            stdout,
            stderr,
            readers,
        }
    }

    /// `GET path` of the admin API as text.
    pub fn get(&self, path: &str) -> String {
        super::super::support::get(format!("{}{path}", self.base))
            .and_then(|r| r.text())
            .unwrap_or_default()
    }

    /// `GET path` as JSON.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        serde_json::from_str(&self.get(path)).unwrap_or(serde_json::Value::Null)
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Kills it with SIGKILL, by its PID, as a crash would.
    pub fn kill9(mut self) {
        signal(self.child.id(), "-KILL");
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the exit: the status, stdout and stderr.
    pub fn terminate(mut self) -> (ExitStatus, String, String) {
        signal(self.child.id(), "-TERM");
        let end = Instant::now() + DEADLINE * 2;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < end, "relay did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = self.stdout.lock().unwrap().clone();
        let err = self.stderr.lock().unwrap().clone();
        (status, out, err)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill {signal} {pid}");
}

/// The `n` of a payload `{"n":N}`.
pub fn n_of(r: &Received) -> usize {
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    v["n"].as_u64().unwrap() as usize
}

/// Adds entries `n` in `range` to `stream`, each with `biz PAYMENT`, `payload {"n":N}` and
/// the fields `extra(n)`, in one pipeline.
pub fn xadd(
    server: &rebound_store_redis::TestServer,
    stream: &str,
    range: std::ops::Range<usize>,
    extra: impl Fn(usize) -> Vec<(&'static str, String)>,
) {
    let mut pipe = redis::pipe();
    for n in range {
        let cmd = pipe
            .cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg("biz")
            .arg("PAYMENT");
        for (field, value) in extra(n) {
            cmd.arg(field).arg(value);
        }
        cmd.arg("payload").arg(format!("{{\"n\":{n}}}")).ignore();
    }
    pipe.query::<()>(&mut server.client()).unwrap();
}

/// Entries of `stream` read by `group` and not acknowledged (`u64::MAX` while the group does
/// not exist: everything is still to be read).
pub fn pending(server: &rebound_store_redis::TestServer, stream: &str, group: &str) -> u64 {
    let Ok(redis::Value::Array(items)) = redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .query::<redis::Value>(&mut server.client())
    else {
        return u64::MAX;
    };
    match items.first() {
        Some(redis::Value::Int(n)) => *n as u64,
        _ => u64::MAX,
    }
}

/// How far the test has released the stream: a handler built with [`Release::answer`] answers
/// a message numbered at or past it with 503 `WAIT` (a code the tests' rules retry again and
/// again), so that a kill or a restart comes mid-run by construction, however fast the rest
/// goes.
#[derive(Clone)]
pub struct Release(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Release {
    /// Messages below `n` are released.
    pub fn upto(n: usize) -> Release {
        Release(std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(n)))
    }

    /// Releases the messages below `n` (every message: `usize::MAX`).
    pub fn to(&self, n: usize) {
        self.0.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// The handler's answer: `WAIT` for what is not released, else `then`'s.
    pub fn answer(
        &self,
        then: impl Fn(&Received) -> Answer + Send + Sync + 'static,
    ) -> impl Fn(&Received) -> Answer + Send + Sync + 'static {
        let released = self.0.clone();
        move |r| {
            if n_of(r) >= released.load(std::sync::atomic::Ordering::SeqCst) {
                Answer::code(503, "WAIT")
            } else {
                then(r)
            }
        }
    }
}
