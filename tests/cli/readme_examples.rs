//! The README's examples, run as written, so that the README cannot drift from the binary:
//!
//! - every ```yaml block parses; a rule file passes `check --strict`, a test file passes
//!   `rebound test` beside the shipped rules, and a configuration file (no `version`) passes
//!   `check --config` from the repository's root;
//! - every `$ rebound …` line of a ```console block runs from the repository's root and prints
//!   the lines under it (in order; other lines, such as a summary, may come between);
//! - every `cargo run --release -- SUBCOMMAND …` named in the text runs (as `rebound …`) and
//!   exits as a good set should, except `run` and `serve`, whose own tests run them.
//!
//! (The long-running examples, `rebound run`, `serve` with its `curl`s, and the Redis fleet,
//! are covered by the run, serve and fleet tests; `tests/run/readme_commands.rs` runs the
//! README's `run` and `serve` commands in order in one working directory.)

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// The fenced blocks of `lang`, with the line each starts at.
fn blocks(text: &str, lang: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut current {
            None => {
                if trimmed == format!("```{lang}") {
                    let indent = line.len() - trimmed.len();
                    current = Some((i + 1, String::new(), indent));
                }
            }
            Some((start, body, indent)) => {
                if trimmed == "```" {
                    out.push((*start, std::mem::take(body)));
                    current = None;
                } else {
                    let cut = line.len().min(*indent);
                    body.push_str(&line[cut..]);
                    body.push('\n');
                }
            }
        }
    }
    out
}

fn rebound(args: &[String], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .expect("run rebound")
}

#[test]
fn every_yaml_example_is_a_valid_rule_or_test_file() {
    let text = readme();
    let yaml = blocks(&text, "yaml");
    assert!(yaml.len() >= 2, "the README has its rule and test examples");
    for (line, body) in yaml {
        let value: serde_yaml::Value = serde_yaml::from_str(&body)
            .unwrap_or_else(|e| panic!("README.md:{line}: not YAML: {e}\n{body}"));
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join("rules");
        std::fs::create_dir_all(rules.join("tests")).unwrap();
        let is_test = value.get("cases").is_some() || value.get("paths").is_some();
        let is_config = !is_test && value.get("version").is_none();
        let mut cwd = dir.path().to_owned();
        let args: Vec<String> = if is_config {
            let config = dir.path().join("config.yaml");
            // `check` reads the token file as `run` and `serve` would: give it one.
            let token = dir.path().join("token");
            std::fs::write(&token, "s3cret\n").unwrap();
            let body = body.replace(
                "token_file: /etc/rebound/token",
                &format!("token_file: {}", token.display()),
            );
            std::fs::write(&config, &body).unwrap();
            cwd = root();
            vec![
                "check".into(),
                "--config".into(),
                config.display().to_string(),
            ]
        } else if is_test {
            for entry in std::fs::read_dir(root().join("rules")).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|x| x == "yaml") {
                    std::fs::copy(&path, rules.join(path.file_name().unwrap())).unwrap();
                }
            }
            std::fs::write(rules.join("tests/readme.yaml"), &body).unwrap();
            vec!["test".into(), "--rules".into(), "rules".into()]
        } else {
            std::fs::write(rules.join("readme.yaml"), &body).unwrap();
            vec![
                "check".into(),
                "--strict".into(),
                "--rules".into(),
                "rules".into(),
            ]
        };
        let out = rebound(&args, &cwd);
        assert!(
            out.status.success(),
            "README.md:{line}: `rebound {}` fails on this example:\n{body}\nstdout:\n{}\nstderr:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_console_example_prints_what_the_readme_shows() {
    let text = readme();
    let mut ran = 0;
    for (line, body) in blocks(&text, "console") {
        let mut lines = body.lines().peekable();
        while let Some(l) = lines.next() {
            let Some(command) = l.strip_prefix("$ rebound ") else {
                continue;
            };
            let mut expected = Vec::new();
            while let Some(next) = lines.peek() {
                if next.starts_with("$ ") {
                    break;
                }
                expected.push(lines.next().unwrap().to_owned());
            }
            let args: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
            let out = rebound(&args, &root());
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let mut seen = printed.lines();
            for want in &expected {
                assert!(
                    seen.any(|got| got == want),
                    "README.md:{line}: `rebound {command}` does not print {want:?} (in order); it printed:\n{printed}"
                );
            }
            ran += 1;
        }
    }
    assert!(ran >= 3, "the README's console examples ran ({ran})");
}

#[test]
fn every_cargo_run_example_of_the_authoring_steps_runs() {
    let text = readme();
    let mut ran = 0;
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("`cargo run --release -- ") {
            let after = &rest[at + "`cargo run --release -- ".len()..];
            let Some(end) = after.find('`') else { break };
            let command = &after[..end];
            rest = &after[end..];
            let args: Vec<String> = command
                .split(" > ")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            match args.first().map(String::as_str) {
                None | Some("run" | "serve") => continue,
                // Writing the schemas is checked without writing them.
                Some("schema") => {
                    let out = rebound(&["schema".into(), "--check".into()], &root());
                    assert!(out.status.success(), "README.md:{}: schema --check", i + 1);
                }
                Some(_) => {
                    let out = rebound(&args, &root());
                    assert!(
                        out.status.success(),
                        "README.md:{}: `rebound {command}` failed:\n{}{}",
                        i + 1,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
            ran += 1;
        }
    }
    assert!(ran >= 4, "the README's authoring commands ran ({ran})");
}

/// The README's `curl` commands, each joined across its `\` continuation lines, with the line
/// it starts at.
fn curls(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let continued = match current.take() {
            Some((start, mut command)) => {
                command.push(' ');
                command.push_str(trimmed);
                Some((start, command))
            }
            None if trimmed.starts_with("curl ") => Some((i + 1, trimmed.to_owned())),
            None => None,
        };
        if let Some((start, command)) = continued {
            match command.strip_suffix('\\') {
                Some(open) => current = Some((start, open.trim_end().to_owned())),
                None => out.push((start, command)),
            }
        }
    }
    out
}

#[test]
fn every_write_curl_carries_the_admin_token() {
    // Writes are every PUT, and every POST but the three that only read
    // (`docs/spec/operations.md`; what-if: `docs/spec/release.md`).
    let readers = ["/v1/decide", "/v1/rules/validate", "/v1/rules/whatif"];
    let mut writes = 0;
    for (line, command) in curls(&readme()) {
        let write = command.contains("-X PUT")
            || (command.contains("-X POST") && !readers.iter().any(|r| command.contains(r)));
        if !write {
            continue;
        }
        writes += 1;
        assert!(
            command.contains("-H \"Authorization: Bearer $REBOUND_ADMIN_TOKEN\""),
            "README.md:{line}: a write without the token header gets 401:\n{command}"
        );
    }
    assert!(
        writes >= 7,
        "the README's write examples were found ({writes})"
    );
}
