//! [`RabbitServer`]: a `rabbitmq-server` of a test's own, on free ports (AMQP, Erlang
//! distribution and its own `epmd`), its database, logs, cookie and configuration in a temp
//! directory, so that a test can kill it (SIGKILL, by the PID of its Erlang VM) and start it
//! again on the same ports from the same database. It never touches the machine's own broker
//! on 5672 nor its `epmd` on 4369. One plugin, `rabbitmq_prometheus`, with per-queue metrics
//! refreshed every 100 ms: a queue's unacknowledged count in a few milliseconds over HTTP
//! (`rabbitmqctl` boots an Erlang VM per call, half a second); no management plugin.
//!
//! Neither the broker nor its `epmd` outlives the test process: each runs under a small `sh`
//! guard that kills it (SIGKILL) when the pipe from the test process closes, which the kernel
//! does when the test process exits, however it exits.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the broker's own scripts (the ones on the PATH switch to the
/// `rabbitmq` user and its home).
const BIN: &str = "/usr/lib/rabbitmq/bin";

/// Runs `"$@"` in the background and prints the PID to kill: the content of `$PID_FILE` once
/// it appears if `$PID_FILE` is set (the broker's Erlang VM, a child of its start script), else
/// the background job's; kills that PID (SIGKILL) as soon as stdin (a pipe from the test
/// process) closes; exits when the job exits.
const GUARD: &str = r#"exec 3<&0
"$@" 3<&- >>"$GUARD_LOG" 2>&1 &
job=$!
pid=$job
if [ -n "$PID_FILE" ]; then
  i=0
  while [ ! -s "$PID_FILE" ] && [ $i -lt 600 ] && kill -0 "$job" 2>/dev/null; do
    sleep 0.05; i=$((i+1))
  done
  pid=$(cat "$PID_FILE" 2>/dev/null)
fi
echo "$pid"
{ read -r _ <&3; kill -9 "$pid" "$job" 2>/dev/null; } &
watch=$!
wait "$job"
status=$?
kill "$watch" 2>/dev/null
exit "$status""#;

/// A process under the guard: the guard shell (its stdin is the pipe whose closing kills the
/// process) and the PID it kills.
struct Guarded {
    guard: Child,
    pid: u32,
}

impl Guarded {
    fn spawn(program: &str, args: &[&str], env: &[(&str, String)]) -> Result<Guarded, String> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARD)
            .arg("rebound-test-rabbit")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut guard = command
            .spawn()
            .map_err(|e| format!("cannot run sh to guard {program}: {e}"))?;
        let mut line = String::new();
        let read = guard
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        match (read, line.trim().parse::<u32>()) {
            (Some(Ok(_)), Ok(pid)) => Ok(Guarded { guard, pid }),
            _ => {
                let _ = guard.kill();
                let _ = guard.wait();
                Err(format!("{program} did not start"))
            }
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.guard.try_wait().ok().flatten()
    }

    /// SIGKILL by PID, and waits until the guard is gone.
    fn kill(mut self) {
        let _ = Command::new("kill")
            .args(["-9", &self.pid.to_string()])
            .status();
        drop(self.guard.stdin.take());
        let _ = self.guard.wait();
    }
}

/// How many brokers one test process runs at once: one. An Erlang VM boots in seconds alone and
/// in a minute or more when a test binary's every case starts one at once on a 2-core
/// machine (the cases run in parallel): past this, a test waits for another's broker to go.
const AT_ONCE: usize = 1;

/// The brokers of this process now, and the wait for one to go.
static RUNNING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// One of the [`AT_ONCE`] brokers a process may run; given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Slot {
        let (count, freed) = &RUNNING;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= AT_ONCE {
            n = freed.wait(n).unwrap_or_else(|p| p.into_inner());
        }
        *n += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (count, freed) = &RUNNING;
        *count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        freed.notify_one();
    }
}

/// A `rabbitmq-server` owned by a test; killed when dropped, or when the test process exits.
/// A process runs at most [`AT_ONCE`] of them at a time: `start` waits for a slot.
pub struct RabbitServer {
    /// Given back once the broker is killed (`drop` runs before the fields go).
    _slot: Slot,
    dir: tempfile::TempDir,
    port: u16,
    dist_port: u16,
    epmd_port: u16,
    metrics_port: u16,
    epmd: Option<Guarded>,
    broker: Option<Guarded>,
}

impl RabbitServer {
    /// Starts a broker (it takes a few seconds to boot). Panics, naming what is missing, if
    /// RabbitMQ is not installed or does not start.
    pub fn start() -> RabbitServer {
        let server = Path::new(BIN).join("rabbitmq-server");
        if !server.exists() || Command::new("epmd").arg("-help").output().is_err() {
            panic!(
                "cannot find {} and epmd: the RabbitMQ tests need a broker of their own; \
                 install it (apt-get install -y rabbitmq-server)",
                server.display()
            );
        }
        let mut last = String::new();
        for _ in 0..3 {
            let mut s = RabbitServer {
                _slot: Slot::take(),
                dir: tempfile::tempdir().expect("a temp directory for rabbitmq-server"),
                port: free_port(),
                dist_port: free_port(),
                epmd_port: free_port(),
                metrics_port: free_port(),
                epmd: None,
                broker: None,
            };
            match s.spawn() {
                Ok(()) => return s,
                Err(e) => last = e,
            }
        }
        panic!("rabbitmq-server did not start: {last}");
    }

    fn node(&self) -> String {
        format!("rebound-test-{}@localhost", self.port)
    }

    /// The environment of the broker and of `rabbitmqctl` for it.
    fn env(&self) -> Vec<(&'static str, String)> {
        let dir = self.dir.path();
        let path = |name: &str| dir.join(name).display().to_string();
        vec![
            ("HOME", path("home")),
            ("RABBITMQ_NODENAME", self.node()),
            ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_NODE_PORT", self.port.to_string()),
            ("RABBITMQ_DIST_PORT", self.dist_port.to_string()),
            ("ERL_EPMD_PORT", self.epmd_port.to_string()),
            ("ERL_EPMD_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_MNESIA_BASE", path("mnesia")),
            ("RABBITMQ_LOG_BASE", path("log")),
            ("RABBITMQ_LOGS", path("log/broker.log")),
            ("RABBITMQ_CONFIG_FILE", path("rabbitmq.conf")),
            ("RABBITMQ_ENABLED_PLUGINS_FILE", path("enabled_plugins")),
            ("RABBITMQ_PID_FILE", path("broker.pid")),
            ("GUARD_LOG", path("guard.log")),
        ]
    }

    fn spawn(&mut self) -> Result<(), String> {
        let dir = self.dir.path().to_path_buf();
        for sub in ["home", "mnesia", "log"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
        }
        // Only the Prometheus plugin, per queue and fresh; else the defaults (the loopback
        // guest user).
        std::fs::write(dir.join("enabled_plugins"), "[rabbitmq_prometheus].\n")
            .map_err(|e| e.to_string())?;
        let conf = format!(
            "prometheus.tcp.port = {}\nprometheus.return_per_object_metrics = true\n\
             collect_statistics_interval = 100\n",
            self.metrics_port
        );
        std::fs::write(dir.join("rabbitmq.conf"), conf).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(dir.join("broker.pid"));
        let env = self.env();
        if self.epmd.as_mut().is_none_or(|e| e.exited().is_some()) {
            let epmd = Guarded::spawn(
                "epmd",
                &[
                    "-port",
                    &self.epmd_port.to_string(),
                    "-address",
                    "127.0.0.1",
                ],
                &env,
            )?;
            self.epmd = Some(epmd);
            // Listening before the broker boots: else its VM starts an epmd of its own.
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(("127.0.0.1", self.epmd_port)).is_err() {
                if Instant::now() > deadline {
                    return Err("the test's epmd does not listen".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut env = env;
        env.push(("PID_FILE", dir.join("broker.pid").display().to_string()));
        let server = format!("{BIN}/rabbitmq-server");
        self.broker = Some(Guarded::spawn(&server, &[], &env)?);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.answers() {
                return Ok(());
            }
            if let Some(status) = self.broker.as_mut().and_then(Guarded::exited) {
                self.broker = None;
                return Err(format!(
                    "rabbitmq-server exited with {status}: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        Err(format!(
            "rabbitmq-server did not answer within 60 s: {}",
            self.log_tail()
        ))
    }

    /// The broker answers an AMQP protocol header with its `connection.start` frame once it
    /// listens (type 1, channel 0).
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let mut frame = [0u8; 3];
        conn.write_all(b"AMQP\x00\x00\x09\x01").is_ok()
            && conn.read_exact(&mut frame).is_ok()
            && frame == [1, 0, 0]
    }

    fn log_tail(&self) -> String {
        let dir = self.dir.path();
        let mut text = std::fs::read_to_string(dir.join("guard.log")).unwrap_or_default();
        text.push_str(&std::fs::read_to_string(dir.join("log/broker.log")).unwrap_or_default());
        let lines: Vec<&str> = text.lines().rev().take(8).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    /// The AMQP port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `amqp://127.0.0.1:PORT/%2F`: the default virtual host `/` (spelled so that any client
    /// reads it as `/`), user `guest`.
    pub fn url(&self) -> String {
        format!("amqp://127.0.0.1:{}/%2F", self.port)
    }

    /// The data directory of the broker's database (under the test's temp directory).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("mnesia")
    }

    /// Runs `rabbitmqctl ARGS` against this broker and returns what it printed; panics,
    /// naming the cause, if it fails.
    pub fn ctl(&self, args: &[&str]) -> String {
        let node = self.node();
        let out = Command::new(format!("{BIN}/rabbitmqctl"))
            .args(["-n", node.as_str(), "-q"])
            .args(args)
            .envs(self.env())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run rabbitmqctl: {e}"));
        assert!(
            out.status.success(),
            "rabbitmqctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// All the messages of a queue of the default virtual host, ready and unacknowledged, as
    /// the broker has them now (`rabbitmqctl list_queues`: exact, and slow); `None` for a
    /// queue it does not have.
    pub fn queue_messages(&self, queue: &str) -> Option<u64> {
        let listed = self.ctl(&["list_queues", "--no-table-headers", "name", "messages"]);
        listed
            .lines()
            .find_map(|line| match line.split('\t').collect::<Vec<_>>()[..] {
                [name, messages] if name == queue => messages.trim().parse().ok(),
                _ => None,
            })
    }

    /// A queue of the default virtual host: its unacknowledged messages and all its messages
    /// (ready and unacknowledged), as the broker counted them at most 100 ms ago; `None` for a
    /// queue it does not have, or a broker that does not answer.
    pub fn queue_counts(&self, queue: &str) -> Option<(u64, u64)> {
        use std::io::{Read, Write};
        let mut conn = TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        conn.read_to_string(&mut text).ok()?;
        let labels = format!("{{vhost=\"/\",queue=\"{queue}\"}} ");
        let value = |metric: &str| {
            let head = format!("{metric}{labels}");
            text.lines()
                .find_map(|l| l.strip_prefix(head.as_str()))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|v| v as u64)
        };
        Some((
            value("rabbitmq_queue_messages_unacked")?,
            value("rabbitmq_queue_messages")?,
        ))
    }

    /// Kills the broker with SIGKILL (its Erlang VM, by PID), and waits until it is gone.
    /// What it confirmed is in its database.
    pub fn kill(&mut self) {
        if let Some(broker) = self.broker.take() {
            broker.kill();
        }
    }

    /// Starts the broker again on the same ports and database. Panics if it does not start.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => {
                    panic!("rabbitmq-server did not restart: {e}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

impl Drop for RabbitServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(epmd) = self.epmd.take() {
            epmd.kill();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}
