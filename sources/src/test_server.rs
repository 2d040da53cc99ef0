//! [`NatsServer`]: a `nats-server -js` of a test's own, on a free port, its store in a temp
//! directory, so that a test can kill it (SIGKILL, by PID) and start it again on the same port
//! from the same store. It never touches the machine's own server on 4222.
//!
//! The server never outlives the test process: it runs under a small `sh` guard that kills it
//! (SIGKILL) when the pipe from the test process closes, which the kernel does when the test
//! process exits, however it exits.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `nats-server "$@"` and prints its PID; kills it (SIGKILL) as soon as its stdin (a pipe
/// from the test process) closes; exits when the server exits, with its status.
const GUARD: &str = r#"exec 3<&0
nats-server "$@" 3<&- >>"$NATS_LOG" 2>&1 &
server=$!
echo "$server"
{ read -r _ <&3; kill -9 "$server" 2>/dev/null; } &
watch=$!
wait "$server"
status=$?
kill "$watch" 2>/dev/null
exit "$status""#;

/// A `nats-server` with JetStream owned by a test; killed when dropped, or when the test
/// process exits.
pub struct NatsServer {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Guarded>,
}

/// The guard shell (its stdin is the pipe whose closing kills the server) and the server's PID.
struct Guarded {
    guard: Child,
    server: u32,
}

impl NatsServer {
    /// Starts a server. Panics, naming what is missing, if `nats-server` is not installed or
    /// does not start.
    pub fn start() -> NatsServer {
        if let Err(e) = Command::new("nats-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            panic!(
                "cannot run nats-server ({e}): the JetStream tests need one of their own; \
                 install it (apt-get install -y nats-server)"
            );
        }
        let mut last = String::new();
        for _ in 0..5 {
            let mut server = NatsServer {
                dir: tempfile::tempdir().expect("a temp directory for nats-server"),
                port: free_port(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("nats-server did not start: {last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let store = self.dir.path().join("store");
        let log = self.dir.path().join("nats.log");
        let mut guard = Command::new("sh")
            .arg("-c")
            .arg(GUARD)
            .arg("rebound-test-nats")
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&store)
            .env("NATS_LOG", &log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run sh to guard nats-server: {e}"))?;
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
                return Err(format!("nats-server did not start: {}", self.log_tail()));
            }
        };
        self.child = Some(Guarded { guard, server });
        let deadline = Instant::now() + Duration::from_secs(20);
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
                    "nats-server exited with {status}: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(format!(
            "nats-server did not answer within 20 s: {}",
            self.log_tail()
        ))
    }

    /// The server greets a connection with its `INFO` line once it listens.
    fn answers(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
        let mut greeting = [0u8; 4];
        conn.read_exact(&mut greeting).is_ok() && &greeting == b"INFO"
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("nats.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server with SIGKILL, by its PID, and waits until it is gone. What it
    /// acknowledged is in its store.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-9", &child.server.to_string()])
                .status();
            // The guard exits once the server has (closing its stdin also kills the server,
            // should `kill` have failed).
            drop(child.guard.stdin.take());
            let _ = child.guard.wait();
        }
    }

    /// Starts the server again on the same port and store (it recovers its streams). Panics
    /// if it does not start.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("nats-server did not restart: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Drop for NatsServer {
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
