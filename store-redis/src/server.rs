//! [`TestServer`]: a `redis-server` of a test's own (feature `test-server`), on a free port in
//! a temp directory, configured as the shared store needs (`appendonly yes`, `appendfsync
//! always`, no RDB, `noeviction`), so that the test can kill it and start it again from its
//! AOF. It never touches the machine's shared Redis.
//!
//! The server never outlives the test process, even one kept in a `static` (never dropped):
//! it runs under a small `sh` guard that kills it (SIGKILL) when the pipe from the test
//! process closes, which the kernel does when the test process exits, however it exits.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `redis-server "$@"` and prints its PID; kills it (SIGKILL) as soon as its stdin (a
/// pipe from the test process) closes; exits when the server exits, with its status.
const GUARD: &str = r#"exec 3<&0
redis-server "$@" 3<&- >/dev/null 2>&1 &
server=$!
echo "$server"
{ read -r _ <&3; kill -9 "$server" 2>/dev/null; } &
watch=$!
wait "$server"
status=$?
kill "$watch" 2>/dev/null
exit "$status""#;

/// A `redis-server` process owned by a test; killed when dropped, or when the test process
/// exits.
pub struct TestServer {
    dir: tempfile::TempDir,
    port: u16,
    extra: Vec<String>,
    child: Option<Guarded>,
}

/// The guard shell (its stdin is the pipe whose closing kills the server) and the server's PID.
struct Guarded {
    guard: Child,
    server: u32,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("port", &self.port)
            .field("pid", &self.pid())
            .finish()
    }
}

impl TestServer {
    /// Starts a server with the shared store's settings. Panics (naming what is missing) if
    /// `redis-server` is not installed or does not start.
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (`["--appendonly", "no"]`), which
    /// override the defaults.
    pub fn start_with(extra: &[&str]) -> TestServer {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let mut server = TestServer {
                dir: tempfile::tempdir().expect("a temp directory for redis-server"),
                port,
                extra: extra.clone(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let dir = self.dir.path().to_string_lossy().into_owned();
        let mut args: Vec<String> = [
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--maxmemory-policy",
            "noeviction",
            "--logfile",
            "redis.log",
            "--daemonize",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.extra.iter().cloned());
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| {
                format!(
                    "cannot run redis-server ({e}); install it: apt-get install -y redis-server"
                )
            })?;
        let mut guard = Command::new("sh")
            .arg("-c")
            .arg(GUARD)
            .arg("rebound-test-redis")
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run sh to guard redis-server: {e}"))?;
        let mut line = String::new();
        let read = guard
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        let server = match (read, line.trim().parse::<u32>()) {
            (Some(Ok(_)), Ok(pid)) => pid,
            _ => {
                let _ = guard.kill();
                let _ = guard.wait();
                return Err(format!("redis-server did not start: {}", self.log_tail()));
            }
        };
        self.child = Some(Guarded { guard, server });
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.guard.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "redis-server exited with {status}: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(format!(
            "redis-server did not answer within 10 s: {}",
            self.log_tail()
        ))
    }

    fn answers(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        match client
            .get_connection_with_timeout(Duration::from_millis(200))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        {
            Ok(_) => true,
            // A server started with `--requirepass` answers, asking for the password.
            Err(e) => e.code() == Some("NOAUTH"),
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its data directory (the AOF is in it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's PID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.server)
    }

    /// Kills the server (SIGKILL) and waits for it to exit. What it acknowledged is in its AOF.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Closing the guard's stdin makes it kill the server; it exits when the server has.
            drop(child.guard.stdin.take());
            let _ = child.guard.wait();
        }
    }

    /// Starts the server again on the same port and directory (it loads its AOF). Panics if
    /// it does not start.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("redis-server did not restart: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// A plain blocking connection, for a test to look at what the store wrote.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("a connection to the test's redis-server")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}
