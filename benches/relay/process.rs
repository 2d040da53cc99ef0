//! Processes: CPU and memory from /proc, and the relay process.

#![allow(unused_imports)]

use super::*;
// Processes: CPU and memory from /proc.

/// A process's user and system CPU seconds (`/proc/PID/stat`, at 100 ticks a second).
pub(crate) fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command: state is field 3, utime 14 and stime 15 (1-based over the line).
    (tick(11) + tick(12)) / 100.0
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// CPU seconds of the relay (if any), redis-server and this process.
#[derive(Clone, Copy, Default)]
pub(crate) struct Cpu {
    pub(crate) relay: f64,
    pub(crate) redis: f64,
    pub(crate) bench: f64,
}

impl Cpu {
    pub(crate) fn now(relay: Option<u32>, c: &mut redis::Connection) -> Cpu {
        Cpu {
            relay: relay.map_or(0.0, |p| cpu_seconds(&p.to_string())),
            redis: redis_cpu(c),
            bench: cpu_seconds("self"),
        }
    }

    pub(crate) fn since(self, before: Cpu) -> Cpu {
        Cpu {
            relay: self.relay - before.relay,
            redis: self.redis - before.redis,
            bench: self.bench - before.bench,
        }
    }
}

// The relay process.

pub(crate) struct Relay {
    pub(crate) child: Child,
    pub(crate) admin: String,
    pub(crate) data: tempfile::TempDir,
    pub(crate) stdout: Arc<Mutex<String>>,
}

impl Relay {
    pub(crate) fn start(redis_port: u16, stream: &str, handler: &str) -> Relay {
        Relay::start_with(redis_port, stream, handler, None)
    }

    /// [`Relay::start`] with a configuration file of `config`'s text, if given.
    pub(crate) fn start_with(
        redis_port: u16,
        stream: &str,
        handler: &str,
        config: Option<&str>,
    ) -> Relay {
        let data = tempfile::tempdir().unwrap();
        let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
        let mut command = Command::new(env!("CARGO_BIN_EXE_rebound"));
        if let Some(text) = config {
            let file = data.path().join("relay.yaml");
            std::fs::write(&file, text).unwrap();
            command.arg("relay").arg("--config").arg(file);
        } else {
            command.arg("relay");
        }
        let mut child = command
            .arg("--source")
            .arg(format!(
                "redis-stream://127.0.0.1:{redis_port}/{stream}?group={GROUP}"
            ))
            .args(["--handler", handler])
            .args(["--admin", "127.0.0.1:0"])
            .arg("--rules")
            .arg(&rules)
            .arg("--data")
            .arg(data.path())
            .env_remove("REBOUND_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the rebound binary starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        for (pipe, sink) in [
            (
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
                Some(stdout.clone()),
            ),
            (Box::new(child.stderr.take().unwrap()), None),
        ] {
            std::thread::spawn(move || {
                let mut lines = BufReader::new(pipe);
                let mut line = String::new();
                while lines.read_line(&mut line).unwrap_or(0) > 0 {
                    match &sink {
                        Some(sink) => sink.lock().unwrap().push_str(&line),
                        None if line.contains("ERROR") || line.contains("WARN") => {
                            eprint!("relay: {line}")
                        }
                        None => {}
                    }
                    line.clear();
                }
            });
        }
        let end = Instant::now() + Duration::from_secs(60);
        let admin = loop {
            if let Some(line) = stdout
                .lock()
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("listening on "))
            {
                break format!("http://{}", line.trim());
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("relay exited ({status}) before listening");
            }
            assert!(Instant::now() < end, "relay did not print its address");
            std::thread::sleep(Duration::from_millis(10));
        };
        Relay {
            child,
            admin,
            data,
            stdout,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then the exit; what it printed on stdout (its report).
    pub(crate) fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > end {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        self.stdout.lock().unwrap().clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
