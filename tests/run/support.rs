//! Shared helpers for the `rebound run` tests: the binary, the shipped rules, a child that is
//! killed if the test fails, and a way to watch a run's progress from outside.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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

/// A child process, SIGKILLed when dropped (so a failing test leaves nothing running).
pub struct Running(pub Option<Child>);

impl Running {
    pub fn spawn(mut cmd: Command) -> Running {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rebound");
        Running(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    pub fn exited(&mut self) -> bool {
        self.0
            .as_mut()
            .expect("running")
            .try_wait()
            .expect("try_wait")
            .is_some()
    }

    /// SIGKILL (`Child::kill` sends SIGKILL on Unix), then reap.
    pub fn kill9(mut self) -> Output {
        let mut child = self.0.take().expect("running");
        let _ = child.kill();
        child.wait_with_output().expect("wait")
    }

    pub fn wait(mut self) -> Output {
        self.0
            .take()
            .expect("running")
            .wait_with_output()
            .expect("wait")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
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
/// prints on stderr; the rest of stderr is read and dropped.
pub fn admin_base(child: &mut Running) -> String {
    use std::io::{BufRead, BufReader};
    let stderr = child.0.as_mut().unwrap().stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("http://") {
                let _ = tx.send(line[at..].trim().to_owned());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the admin address on stderr")
}
