//! The README's `run` and `serve` commands, typed in order by a newcomer in one working
//! directory, never collide on a data directory (issue 33, item 14).
//!
//! Every command of the README that starts the pipeline (`cargo run --release -- run|serve …`
//! or `rebound run|serve …`, in a code block or inline in the text) is taken in the order it
//! appears, and:
//!
//! - no two of them share a data directory (`--data`, default `rebound-data`) unless they
//!   are the same run: another run there is refused (exit 2), or, when its recorded
//!   parameters happen to match (`--outage`, `--ordered` after `--keyed`), silently prints
//!   the earlier run's report instead of its own;
//! - each one runs against the debug binary in one temporary working directory holding a
//!   copy of the shipped rules, and exits 0. A `run` waits for its report; a `serve` is
//!   started, waited for until it prints `listening on`, and stopped with SIGTERM.
//!
//! What the test changes in a command, and why:
//! - `--messages N` becomes N/100, and a `run` without it gets `--messages 500` (the default
//!   50,000 / 100): a debug build runs the README's counts in minutes. One ratio for all keeps
//!   which commands are the same run and which are not.
//! - `--admin HOST:PORT` becomes `--admin 127.0.0.1:0`: tests run side by side.
//!
//! What it skips: commands on a shared store (`--store redis://…`) need a Redis 7 server, and
//! the fleet tests (`tests/fleet`) run them; their `--data` still takes part in the first
//! check. Inline mentions that are only a name (`` `rebound run` `` in a sentence) are not
//! commands. The flag synopses (lines with `[--…]`) are not commands either. The other
//! subcommands open no data directory; `tests/cli/readme_examples.rs` runs them.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

/// One command of the README: the line it starts on and its arguments after `rebound`.
#[derive(Debug)]
struct Example {
    line: usize,
    args: Vec<String>,
}

impl Example {
    fn shown(&self) -> String {
        format!("README.md:{}: `rebound {}`", self.line, self.args.join(" "))
    }

    fn value(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|a| a == flag)?;
        self.args.get(at + 1).map(String::as_str)
    }

    fn data(&self) -> String {
        self.value("--data").unwrap_or("rebound-data").to_owned()
    }

    /// What makes the run: the arguments but those that only change how it is watched.
    fn run_key(&self) -> Vec<String> {
        let mut key = Vec::new();
        let mut args = self.args.iter();
        while let Some(a) = args.next() {
            match a.as_str() {
                "--json" => {}
                "--data" | "--admin" | "--log-format" | "--token-file" => {
                    args.next();
                }
                _ => key.push(a.clone()),
            }
        }
        key
    }
}

const PREFIXES: [&str; 2] = ["cargo run --release -- ", "rebound "];

/// A command's words after `rebound` (its comment, a trailing `&` and any redirection cut),
/// or `None` when `text` is not a command of the binary.
fn words(text: &str) -> Option<Vec<String>> {
    let text = text.trim();
    let text = text.strip_prefix("$ ").unwrap_or(text);
    let rest = PREFIXES.iter().find_map(|p| text.strip_prefix(p))?;
    let rest = rest.split(" #").next().unwrap_or("");
    let rest = rest.split(['>', '|']).next().unwrap_or("");
    let rest = rest.trim().trim_end_matches('&');
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Every command of the binary in `text`, in order: code lines (in ```sh and ```console
/// blocks, or indented by four spaces), joined across `\` continuations, and inline code
/// spans (which may cross a line break) that carry at least one flag.
fn examples(text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    let mut continued: Option<(usize, String)> = None;
    let mut span: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if let Some((start, mut command)) = continued.take() {
            command.push(' ');
            command.push_str(trimmed);
            match command.strip_suffix('\\') {
                Some(open) => continued = Some((start, open.to_owned())),
                None => out.extend(words(&command).map(|args| Example { line: start, args })),
            }
            continue;
        }
        if let Some(lang) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(lang.to_owned()),
            };
            span = None;
            continue;
        }
        let code = match &fence {
            Some(lang) => matches!(lang.as_str(), "sh" | "console" | ""),
            None => raw.starts_with("    "),
        };
        if code {
            match trimmed.strip_suffix('\\') {
                Some(open) if words(open).is_some() => continued = Some((line, open.to_owned())),
                _ => out.extend(words(trimmed).map(|args| Example { line, args })),
            }
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if trimmed.is_empty() {
            span = None;
            continue;
        }
        // Inline spans: the text between backticks, carried across line breaks.
        if let Some((_, text)) = &mut span {
            text.push(' ');
        }
        for c in raw.chars() {
            match (&mut span, c) {
                (None, '`') => span = Some((line, String::new())),
                (Some((start, text)), '`') => {
                    if let Some(args) =
                        words(text).filter(|a| a.iter().any(|w| w.starts_with("--")))
                    {
                        out.push(Example { line: *start, args });
                    }
                    span = None;
                }
                (Some((_, text)), c) => text.push(c),
                (None, _) => {}
            }
        }
    }
    out
}

/// The README's `run` and `serve` commands (their synopses left out).
fn pipeline_examples() -> Vec<Example> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    examples(&text)
        .into_iter()
        .filter(|e| matches!(e.args.first().map(String::as_str), Some("run" | "serve")))
        .filter(|e| !e.args.iter().any(|a| a.starts_with('[')))
        .collect()
}

/// `example` as the test runs it: a smaller count, a free admin port.
fn as_run(example: &Example) -> Vec<String> {
    let mut args = Vec::new();
    let mut given = example.args.iter();
    while let Some(a) = given.next() {
        args.push(a.clone());
        match a.as_str() {
            "--messages" => {
                let n: u64 = given
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{}: --messages takes a number", example.shown()));
                args.push((n / 100).max(1).to_string());
            }
            "--admin" => {
                given.next();
                args.push("127.0.0.1:0".into());
            }
            _ => {}
        }
    }
    if args[0] == "run" && example.value("--messages").is_none() {
        args.extend(["--messages".into(), "500".into()]);
    }
    args
}

#[test]
fn the_readme_finds_its_pipeline_commands() {
    let found = pipeline_examples();
    let shown: Vec<String> = found.iter().map(Example::shown).collect();
    for want in ["--keyed", "--ordered", "--outage"] {
        assert!(
            found.iter().any(|e| e.args.iter().any(|a| a == want)),
            "no `run {want}` found in {shown:#?}"
        );
    }
    assert!(
        found
            .iter()
            .any(|e| e.args[0] == "serve" && e.value("--store").is_none()),
        "no `serve` on the embedded store found in {shown:#?}"
    );
    assert!(
        found
            .iter()
            .all(|e| !(e.args.len() == 1 && e.args[0] == "serve")),
        "a bare mention was taken for a command: {shown:#?}"
    );
}

#[test]
fn no_two_readme_commands_share_a_data_directory_unless_they_are_the_same_run() {
    let mut seen: BTreeMap<String, &Example> = BTreeMap::new();
    let examples = pipeline_examples();
    for example in &examples {
        let data = example.data();
        match seen.get(&data) {
            Some(first) if first.run_key() != example.run_key() => panic!(
                "{} uses the data directory {data} of {}: it would be refused (exit 2) or print \
                 that run's report; give it a --data of its own",
                example.shown(),
                first.shown()
            ),
            Some(_) => {}
            None => {
                seen.insert(data, example);
            }
        }
    }
}

#[test]
fn the_readme_commands_run_in_order_in_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let rules = cwd.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    for entry in std::fs::read_dir(shipped_rules()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, rules.join(path.file_name().unwrap())).unwrap();
        }
    }
    let mut ran = 0;
    for example in pipeline_examples() {
        if example.value("--store").is_some_and(|s| s != "sqlite") {
            continue;
        }
        let args = as_run(&example);
        let mut cmd = Command::new(bin());
        cmd.args(&args).current_dir(cwd).env_remove("RUST_LOG");
        let shown = format!("{} (run as `rebound {}`)", example.shown(), args.join(" "));
        let out = if args[0] == "serve" {
            let mut child = Running::spawn(cmd);
            let listening = wait_until(Duration::from_secs(120), || {
                child.exited() || child.stdout_so_far().contains("listening on ")
            });
            assert!(
                listening,
                "{shown}: no `listening on` yet:\n{}",
                child.stderr_so_far()
            );
            if !child.exited() {
                let sent = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status()
                    .unwrap();
                assert!(sent.success());
            }
            child.wait()
        } else {
            Running::spawn(cmd).wait()
        };
        assert_eq!(
            out.status.code(),
            Some(0),
            "{shown} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 5, "the README's pipeline commands ran ({ran})");
}
