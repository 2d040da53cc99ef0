//! The README's relay section, typed as a newcomer would (issue 27, item 5): its `handler.py`
//! saved as it is, its commands run in order in one working directory (holding a copy of the
//! shipped rules, as the repository's root does), and what the section says happens, checked.
//!
//! What the test changes in a command, and why: the ports (6399, 9000, 8080) become free ones,
//! so tests run side by side; `cargo run --release --` becomes the debug binary the tests
//! built. A line ending in `&` runs in the background (its port is waited for, as a person
//! would see it start before typing the next line); the relay runs in the background too,
//! and is stopped with SIGINT, as Ctrl-C would.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::support::within;

const HEADING: &str = "## Your own service behind the retries: `rebound relay`";

/// The section's fenced blocks of `lang`.
fn blocks(section: &str, lang: &str) -> Vec<String> {
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = section;
    while let Some(at) = rest.find(&fence) {
        let body = &rest[at + fence.len()..];
        let end = body.find("```\n").expect("a closed block");
        out.push(body[..end].to_owned());
        rest = &body[end..];
    }
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    assert!(
        within(Duration::from_secs(20), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "nothing listens on {port}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Background processes, killed when the test ends however it ends.
struct Background(Vec<(String, Child)>);

impl Drop for Background {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn the_readme_s_relay_section_works_as_it_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme
        .find(HEADING)
        .expect("the README has the relay section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let [handler] = &blocks(section, "python")[..] else {
        panic!("one python block in the section")
    };
    let [commands] = &blocks(section, "sh")[..] else {
        panic!("one sh block in the section")
    };
    let (redis, web, admin) = (free_port(), free_port(), free_port());
    let ports = |s: &str| {
        s.replace("6399", &redis.to_string())
            .replace("9000", &web.to_string())
            .replace("8080", &admin.to_string())
    };
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root.join("rules"), &dir.path().join("rules"));
    std::fs::write(dir.path().join("handler.py"), ports(handler)).unwrap();
    let binary = env!("CARGO_BIN_EXE_rebound");
    let mut background = Background(Vec::new());
    for line in commands.lines().filter(|l| !l.trim().is_empty()) {
        let line = ports(line).replace("cargo run --release --", binary);
        let (command, in_background) = match line.trim_end().strip_suffix('&') {
            Some(c) => (c.trim().to_owned(), true),
            None => (line.trim().to_owned(), line.contains(" relay ")),
        };
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(if in_background {
                format!("exec {command}")
            } else {
                command.clone()
            })
            .current_dir(dir.path())
            .env_remove("REBOUND_ADMIN_TOKEN")
            .stdin(Stdio::null());
        if in_background {
            // out-0.log: redis-server's; out-1.log: the handler's; out-2.log: the relay's.
            let log = dir.path().join(format!("out-{}.log", background.0.len()));
            let log = std::fs::File::create(log).unwrap();
            cmd.stdout(log.try_clone().unwrap()).stderr(log);
            let child = cmd.spawn().unwrap_or_else(|e| panic!("{command}: {e}"));
            background.0.push((command.clone(), child));
            if command.contains(&format!("--port {redis}")) {
                wait_for_port(redis);
            } else if command.contains("handler.py") {
                wait_for_port(web);
            } else {
                wait_for_port(admin);
            }
        } else {
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{command}: {out:?}");
        }
    }
    let handler_log = || std::fs::read_to_string(dir.path().join("out-1.log")).unwrap_or_default();
    let deliveries = |order: u32, attempt: u32| {
        handler_log()
            .lines()
            .filter(|l| l.ends_with(&format!("order {order} attempt {attempt}")))
            .count()
    };
    let get = |path: &str| {
        super::super::support::get(format!("http://127.0.0.1:{admin}{path}"))
            .and_then(|r| r.text())
            .unwrap_or_default()
    };
    let pending = || {
        let out = Command::new("redis-cli")
            .args(["-p", &redis.to_string(), "XPENDING", "orders", "rebound"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    let letters =
        || serde_json::from_str::<serde_json::Value>(&get("/v1/dead-letters")).unwrap_or_default();
    // "orders 3 and 6 twice (attempt 2 at least two seconds later), order 5 once".
    assert!(
        within(Duration::from_secs(30), || {
            deliveries(3, 2) == 1
                && deliveries(6, 2) == 1
                && letters()["total"] == 1
                && pending() == "0"
        }),
        "handler:\n{}\nletters {}\npending {}\n",
        handler_log(),
        letters(),
        pending()
    );
    for order in [1, 2, 4, 5] {
        assert_eq!(deliveries(order, 1), 1, "order {order}:\n{}", handler_log());
        assert_eq!(deliveries(order, 2), 0, "order {order}:\n{}", handler_log());
    }
    let letter = &letters()["dead_letters"][0];
    assert_eq!(letter["label"], "L3", "{letter}");
    assert!(get("/ui/").contains("<html"), "the console answers");
    // Ctrl-C: the relay stops and prints its report.
    let (_, relay) = background.0.last_mut().unwrap();
    Command::new("kill")
        .args(["-INT", &relay.id().to_string()])
        .status()
        .unwrap();
    let status = relay.wait().unwrap();
    let out = std::fs::read_to_string(dir.path().join("out-2.log")).unwrap_or_default();
    assert!(status.success(), "{status}\n{out}");
    for part in [
        "received       6",
        "acked          5",
        "dead-lettered  1",
        "retried        2",
    ] {
        assert!(out.contains(part), "{part:?} missing from:\n{out}");
    }
}
