//! Shared helpers for the `rebound run` tests: the binary, the shipped rules, a child that is
//! killed if the test fails, and a way to watch a run's progress from outside.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rebound::pipeline::PipelineDb;
use rebound_runtime::store::{self, Fate, SqliteStore, Store};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rebound")
}

pub fn shipped_rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rules")
}

/// `rebound run` with these arguments.
pub fn run_cmd(data: &Path, rules: &Path, messages: u64, scale: f64) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--json", "--messages", &messages.to_string()])
        .args(["--time-scale", &scale.to_string()])
        .arg("--data")
        .arg(data)
        .arg("--rules")
        .arg(rules)
        .env_remove("RUST_LOG");
    cmd
}

/// A child process, SIGKILLed when dropped (so a failing test leaves nothing running). What
/// it writes to a piped stdout or stderr is read as it comes, by a thread each: a child whose
/// pipe nobody empties blocks on its next log line once the pipe's 64 KiB are full, and a
/// test polling it for its exit would wait for ever.
pub struct Running {
    child: Option<Child>,
    stdout: Option<Drain>,
    stderr: Option<Drain>,
}

/// A pipe read to its end on a thread of its own.
struct Drain {
    read: Arc<Mutex<Vec<u8>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Drain {
    fn of(mut pipe: impl std::io::Read + Send + 'static) -> Drain {
        let read = Arc::new(Mutex::new(Vec::new()));
        let into = read.clone();
        let thread = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Drain { read, thread }
    }

    fn so_far(&self) -> Vec<u8> {
        self.read.lock().unwrap().clone()
    }

    fn finish(self) -> Vec<u8> {
        let _ = self.thread.join();
        Arc::try_unwrap(self.read)
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_else(|shared| shared.lock().unwrap().clone())
    }
}

impl Running {
    /// Spawns `cmd` with stdout and stderr piped (and read as they come).
    pub fn spawn(mut cmd: Command) -> Running {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rebound");
        Running::of(child)
    }

    /// Takes `child` over, reading whichever of its stdout and stderr is piped.
    pub fn of(mut child: Child) -> Running {
        let stdout = child.stdout.take().map(Drain::of);
        let stderr = child.stderr.take().map(Drain::of);
        Running {
            child: Some(child),
            stdout,
            stderr,
        }
    }

    /// A placeholder that runs nothing.
    pub fn none() -> Running {
        Running {
            child: None,
            stdout: None,
            stderr: None,
        }
    }

    /// Whether it runs a child (not [`none`](Self::none)).
    pub fn is_some(&self) -> bool {
        self.child.is_some()
    }

    pub fn id(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .expect("running")
            .try_wait()
            .expect("try_wait")
            .is_some()
    }

    /// What the child wrote on stdout so far (empty unless it is piped).
    pub fn stdout_so_far(&self) -> String {
        let bytes = self.stdout.as_ref().map(Drain::so_far).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// What the child wrote on stderr so far (empty unless it is piped).
    pub fn stderr_so_far(&self) -> String {
        let bytes = self.stderr.as_ref().map(Drain::so_far).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// SIGKILL (`Child::kill` sends SIGKILL on Unix), then reap.
    pub fn kill9(mut self) -> Output {
        let _ = self.child.as_mut().expect("running").kill();
        self.wait()
    }

    /// Waits for the exit (at most [`WAIT_AT_MOST`]), then for the last of its output.
    pub fn wait(self) -> Output {
        self.wait_within(WAIT_AT_MOST)
    }

    /// Waits at most `deadline` for the exit, then for the last of its output. A child still
    /// running past it fails the test, saying what each of its threads was doing (it is then
    /// killed as the `Running` is dropped): a process that hangs fails its test, never the
    /// whole run's time.
    pub fn wait_within(self, deadline: Duration) -> Output {
        self.wait_logged(deadline, None)
    }

    /// [`wait_within`](Self::wait_within) for a child whose stderr goes to the file `log`
    /// (its tail is in the failure).
    pub fn wait_logged(self, deadline: Duration, log: Option<&Path>) -> Output {
        self.wait_or_explain(deadline, log, String::new)
    }

    /// [`wait_logged`](Self::wait_logged), adding what `explain` says (read when the deadline
    /// passes: what the test can see of the child's state) to the failure.
    pub fn wait_or_explain(
        mut self,
        deadline: Duration,
        log: Option<&Path>,
        explain: impl FnOnce() -> String,
    ) -> Output {
        let child = self.child.as_mut().expect("running");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if start.elapsed() >= deadline {
                let pid = child.id();
                let stderr = match log {
                    Some(log) => std::fs::read_to_string(log).unwrap_or_default(),
                    None => self.stderr_so_far(),
                };
                panic!(
                    "rebound (pid {pid}) has not exited after {deadline:?}\n{}\n{}\nits stderr's tail:\n{}",
                    explain(),
                    threads_of(pid),
                    tail(&stderr, 40)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.child = None;
        Output {
            status,
            stdout: self.stdout.take().map(Drain::finish).unwrap_or_default(),
            stderr: self.stderr.take().map(Drain::finish).unwrap_or_default(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The longest [`Running::wait`] waits for an exit.
pub const WAIT_AT_MOST: Duration = Duration::from_secs(600);

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What each thread of process `pid` is doing: its name, state and kernel wait channel, and
/// (where `gdb` is installed) every thread's stack.
pub fn threads_of(pid: u32) -> String {
    let mut out = String::from("its threads (name, state, waiting in):\n");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let stat = read("stat");
        // The state follows the name's closing parenthesis.
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        out.push_str(&format!(
            "  {:<24} {} {}\n",
            read("comm").trim(),
            state.unwrap_or("?"),
            read("wchan").trim()
        ));
    }
    let gdb = Command::new("gdb")
        .args([
            "-p",
            &pid.to_string(),
            "-batch",
            "-nx",
            "-ex",
            "thread apply all bt 30",
        ])
        .stdin(Stdio::null())
        .output();
    if let Ok(gdb) = gdb {
        out.push_str("gdb's stacks:\n");
        out.push_str(&String::from_utf8_lossy(&gdb.stdout));
    }
    out
}

/// Orders written so far by the run in `data` (0 before the file exists).
pub fn orders_written(data: &Path) -> u64 {
    if !data.join(rebound::pipeline::db::PIPELINE_DB).exists() {
        return 0;
    }
    PipelineDb::open_read_only(data)
        .and_then(|db| db.orders_written())
        .unwrap_or(0)
}

/// Polls `f` every 10 ms until it holds or `deadline` passes.
pub fn wait_until(deadline: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

pub fn report(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn open_store(data: &Path) -> SqliteStore {
    SqliteStore::open(data).expect("open the store")
}

/// The fate of every order `1..=n`, from the store: its recorded fate, or acked when the order
/// spout's committed position covers it (the store prunes the acked fates behind the position:
/// the position is their record; dead-lettered fates are always kept).
pub fn fates(store: &SqliteStore, n: u64) -> Vec<(String, Option<Fate>)> {
    let committed = store
        .position(rebound::pipeline::orders::SOURCE)
        .expect("position")
        .unwrap_or(0);
    let ids: Vec<String> = (1..=n).map(rebound::pipeline::orders::order_id).collect();
    let mut out = Vec::with_capacity(ids.len());
    for (c, chunk) in ids.chunks(1000).enumerate() {
        let query: Vec<store::MessageId> = chunk
            .iter()
            .map(|i| store::MessageId::from(i.as_str()))
            .collect();
        let known: std::collections::HashMap<String, Fate> = store
            .known_fates(&query)
            .expect("known_fates")
            .into_iter()
            .map(|(id, f)| (id.to_string(), f))
            .collect();
        out.extend(chunk.iter().enumerate().map(|(i, id)| {
            let n = (c * 1000 + i + 1) as u64;
            let fate = known.get(id).copied();
            let covered = (n <= committed).then_some(Fate::Acked);
            (id.clone(), fate.or(covered))
        }));
    }
    out
}

/// `promtool` (Debian's `prometheus` package; `.ci/run` installs it). A test that needs it
/// fails, never skips, when it is missing.
pub fn promtool() -> Command {
    let found = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "promtool is not installed: `apt-get install -y prometheus` (Debian's package) brings it; \
         .ci/run installs it"
    );
    Command::new("promtool")
}

/// Runs `promtool ARGS…` with `stdin` as its input; panics with its output unless it succeeds.
pub fn promtool_ok(args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = promtool()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    let mut input = child.stdin.take().expect("promtool's stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write to promtool");
    }
    drop(input);
    let out = child.wait_with_output().expect("wait for promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{said}");
    said
}

/// The value of the sample `series` (a name with its labels, as exposed) in `text`.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().expect("a sample value"))
}

/// Every sample of metric `name` with one label `label`, as label value → value.
pub fn samples_by(text: &str, name: &str, label: &str) -> std::collections::BTreeMap<String, f64> {
    let head = format!("{name}{{{label}=\"");
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&head)?;
            let (key, value) = rest.split_once("\"} ")?;
            Some((
                key.to_owned(),
                value.trim().parse().expect("a sample value"),
            ))
        })
        .collect()
}

/// The admin API's base URL (`http://ADDR`) that a run started with `--admin 127.0.0.1:0`
/// prints on stderr.
pub fn admin_base(child: &mut Running) -> String {
    let mut found = None;
    wait_until(Duration::from_secs(60), || {
        found = child
            .stderr_so_far()
            .lines()
            .find_map(|line| line.find("http://").map(|at| line[at..].trim().to_owned()));
        found.is_some()
    });
    found.expect("the admin address on stderr")
}

/// A blocking HTTP client's builder for the tests. The product builds reqwest without a TLS
/// provider of its own (src/outbound hands it a rustls config over ring), so a client a test
/// builds needs ring installed as the process's provider first: build every client here.
pub fn http() -> reqwest::blocking::ClientBuilder {
    rebound::outbound::use_ring_by_default();
    reqwest::blocking::Client::builder()
}

/// `GET url` with a client of [`http`].
pub fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::blocking::Response> {
    http().build()?.get(url).send()
}
