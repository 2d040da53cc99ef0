//! A black-box fuzzer for rule sets: it mutates the shipped rules and the test fixtures (byte
//! flips, byte-order marks, tabs, NULs, CRLF, truncations, duplicated and swapped lines and
//! keys, random rhai guards and scripts, huge numbers, deep nesting, random durations, globs
//! and comparisons), compiles each set in-process with `rebound_engine::compile`, and feeds
//! some as JSON bodies of `PUT /v1/rules` / `POST /v1/rules/validate` through the admin's body
//! type and the reloader's dry run. It reports panics, hangs (over 2 s) and diagnostics
//! without a line and column whose file has content, and saves each such input.
//!
//! Before a release, run it for ten minutes (in release mode; the seed is printed, and the
//! same seed generates the same cases):
//!
//! ```sh
//! cargo run --release --example fuzz_rules -- --seconds 600
//! cargo run --release --example fuzz_rules -- --seconds 600 --seed 7 --out /tmp/fuzz
//! ```
//!
//! Flags: `--seconds N` (default 60), `--seed N` (default: from the clock), `--cases N`
//! (stop after N cases), `--out DIR` (default `target/fuzz_rules/`). Exit status 1 when it
//! found a panic, a hang or a diagnostic without a position, else 0. Guards include calls the
//! sandbox must refuse (`sleep`, `exit`, the clock) and nested closures that only its own
//! operation count stops.

mod generate;
mod mutate;
mod run;

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use rebound::admin::rules::PushBody;
use rebound_engine::reload::{PushError, ReloadOptions, Reloader};
use rebound_engine::{SourceFile, compile, read_dir};
use run::{Outcome, Verdict, has_content, unlocated};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use std::{env, fs, process};

/// A case still running after this long is a hang.
const HANG: Duration = Duration::from_secs(2);
/// At most this many inputs are saved; further findings are only counted.
const MAX_SAVED: usize = 200;
/// Hung cases whose threads are still running; past this the run stops (2 cores).
const MAX_HUNG_ALIVE: usize = 3;

struct Args {
    seconds: u64,
    seed: u64,
    cases: u64,
    out: PathBuf,
}

fn args() -> Result<Args, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = Args {
        seconds: 60,
        seed: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        cases: u64::MAX,
        out: root.join("target/fuzz_rules"),
    };
    let mut it = env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--seconds" => args.seconds = number()?,
            "--seed" => args.seed = number()?,
            "--cases" => args.cases = number()?,
            "--out" => args.out = PathBuf::from(&value),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

/// The rule sets to start from: the shipped rules and every fixture directory.
fn corpus(root: &Path) -> Vec<Vec<SourceFile>> {
    let mut dirs = vec![root.join("rules")];
    for group in ["tests/fixtures/errors", "tests/fixtures/toolkit"] {
        let Ok(entries) = fs::read_dir(root.join(group)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        found.sort();
        dirs.extend(found.into_iter().filter(|p| p.is_dir()));
    }
    dirs.iter()
        .filter_map(|d| read_dir(d).ok())
        .filter(|set| !set.is_empty())
        .collect()
}

/// One input: a set to compile, or a push body.
enum Input {
    Set(Vec<SourceFile>),
    Push(Vec<u8>),
}

/// The input of case `n`: a function of the seed and `n` alone.
fn case(seed: u64, n: u64, corpus: &[Vec<SourceFile>]) -> Input {
    let mut rng = SmallRng::seed_from_u64(seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    if rng.random_bool(0.3) {
        // The shipped rules (the corpus's first set), mildly changed.
        let mut files = corpus.first().cloned().unwrap_or_default();
        if !files.is_empty() {
            let i = rng.random_range(0..files.len());
            mutate::mild(&mut rng, &mut files[i].bytes);
            return Input::Set(files);
        }
    }
    let mut files: Vec<SourceFile> = if rng.random_bool(0.15) {
        Vec::new()
    } else {
        corpus.choose(&mut rng).cloned().unwrap_or_default()
    };
    if files.is_empty() || rng.random_bool(0.2) {
        let name = format!("{:02}-generated.yaml", rng.random_range(0..100));
        let text = generate::rule_file(&mut rng);
        files.push(SourceFile::new(name.clone(), format!("gen/{name}"), text));
    }
    for _ in 0..rng.random_range(1..3) {
        if rng.random_bool(0.9) {
            let i = rng.random_range(0..files.len());
            mutate::mutate(&mut rng, &mut files[i].bytes);
        }
    }
    if rng.random_bool(0.2) {
        Input::Push(push_body(&mut rng, &files))
    } else {
        Input::Set(files)
    }
}

/// `{"files": {name: content}}` for `files`, sometimes with bad names, bad shapes or
/// mutated bytes.
fn push_body(rng: &mut SmallRng, files: &[SourceFile]) -> Vec<u8> {
    let mut map: BTreeMap<String, String> = files
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                String::from_utf8_lossy(&f.bytes).into_owned(),
            )
        })
        .collect();
    if rng.random_bool(0.1) {
        let bad = [
            "../x.yaml",
            "a.txt",
            "",
            ".hidden.yaml",
            "dir/a.yaml",
            "a\0.yaml",
            "ü.yaml",
            "a.yml",
        ];
        map.insert(bad.choose(rng).unwrap().to_string(), "version: 1\n".into());
    }
    if rng.random_bool(0.03) {
        map.clear();
    }
    let mut body = serde_json::to_vec(&serde_json::json!({ "files": map })).unwrap_or_default();
    match rng.random_range(0..10) {
        0 => mutate::mutate(rng, &mut body),
        1 => {
            let depth = rng.random_range(100..5000);
            body = format!("{{\"files\": {}1{}}}", "[".repeat(depth), "]".repeat(depth)).into();
        }
        2 => {
            let odd = [
                "{\"files\": []}",
                "{\"files\": {\"a.yaml\": 1}}",
                "{\"files\": {}, \"extra\": 1}",
                "[]",
                "{\"files\": {\"a.yaml\": \"version: 1\\ud800\"}}",
                "{\"files\": {\"a.yaml\": \"\\ufeff\\ufeffversion: 1\\u0000\"}}",
                "{\"files\": {\"a.yaml\": \"version: 1\", \"a.yaml\": \"version: 2\"}}",
            ];
            body = odd.choose(rng).unwrap().as_bytes().to_vec();
        }
        _ => {}
    }
    body
}

/// Compiles `files` and checks every diagnostic has a place.
fn check_set(files: Vec<SourceFile>) -> Outcome {
    let content: HashMap<String, bool> = files
        .iter()
        .map(|f| (f.path.clone(), has_content(&f.bytes)))
        .collect();
    match compile(files) {
        Ok(set) => Outcome {
            accepted: true,
            unlocated: unlocated(set.warnings(), &content),
        },
        Err(rejected) => Outcome {
            accepted: false,
            unlocated: unlocated(&rejected.0, &content),
        },
    }
}

/// Parses a push body as the admin API does, then validates it as `POST /v1/rules/validate`.
fn check_push(body: &[u8], reloader: &Reloader) -> Outcome {
    let rejected = Outcome {
        accepted: false,
        unlocated: Vec::new(),
    };
    let Ok(PushBody { files, .. }) = serde_json::from_slice::<PushBody>(body) else {
        return rejected;
    };
    let content: HashMap<String, bool> = files
        .iter()
        .map(|(name, text)| (name.clone(), has_content(text.as_bytes())))
        .collect();
    match reloader.validate(files, None) {
        Ok(pushed) => Outcome {
            accepted: true,
            unlocated: unlocated(&pushed.warnings, &content),
        },
        Err(PushError::Rejected(r)) => Outcome {
            accepted: false,
            unlocated: unlocated(&r.0, &content),
        },
        Err(_) => rejected,
    }
}

#[derive(Default)]
struct Tally {
    sets: u64,
    pushes: u64,
    accepted: u64,
    rejected: u64,
    panics: u64,
    hangs: u64,
    unlocated: u64,
    saved: usize,
    /// Findings by kind and message shape, with how often each came.
    shapes: BTreeMap<String, u64>,
}

/// Writes a finding's input and message into `out/{kind}-{n}/`.
fn save(out: &Path, kind: &str, seed: u64, n: u64, input: &Input, message: &str) {
    let dir = out.join(format!("{kind}-{n}"));
    let written = fs::create_dir_all(&dir).and_then(|()| {
        match input {
            Input::Set(files) => {
                for f in files {
                    let name: String = f.name.chars().filter(|c| !"/\\\0".contains(*c)).collect();
                    fs::write(dir.join(name), &f.bytes)?;
                }
            }
            Input::Push(body) => fs::write(dir.join("body.json"), body)?,
        }
        let how = format!("cargo run --release --example fuzz_rules -- --seed {seed}");
        fs::write(
            dir.join("message.txt"),
            format!("{kind}, case {n} of {how}\n{message}\n"),
        )
    });
    if let Err(e) = written {
        eprintln!("fuzz_rules: cannot save {}: {e}", dir.display());
    }
}

/// A message with its particulars (quoted text, numbers) blanked, to group findings.
fn shape(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                if quoted {
                    out.push_str("'…'");
                }
            }
            _ if quoted => {}
            '0'..='9' => {
                if !out.ends_with('N') {
                    out.push('N');
                }
            }
            _ => out.push(c),
        }
    }
    out.chars().take(120).collect()
}

fn main() {
    let args = args().unwrap_or_else(|e| {
        eprintln!(
            "fuzz_rules: {e}\nusage: fuzz_rules [--seconds N] [--seed N] [--cases N] [--out DIR]"
        );
        process::exit(2);
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = corpus(root);
    let scratch = tempfile::tempdir().expect("a temporary directory");
    fs::write(scratch.path().join("00-base.yaml"), "version: 1\n").expect("a base rule file");
    let reloader = Arc::new(
        Reloader::open(scratch.path(), ReloadOptions::default()).expect("the base set loads"),
    );
    run::quiet_panics();
    eprintln!(
        "fuzz_rules: seed {} for {} s, {} starting sets; findings go to {}",
        args.seed,
        args.seconds,
        corpus.len(),
        args.out.display()
    );
    let started = Instant::now();
    let limit = Duration::from_secs(args.seconds);
    let mut last_progress = Instant::now();
    let mut hung: Vec<JoinHandle<()>> = Vec::new();
    let mut t = Tally::default();
    let mut n = 0;
    while n < args.cases && started.elapsed() < limit {
        let input = case(args.seed, n, &corpus);
        let verdict = match &input {
            Input::Set(files) => {
                t.sets += 1;
                let files = files.clone();
                run::run(format!("case-{n}"), HANG, move || check_set(files))
            }
            Input::Push(body) => {
                t.pushes += 1;
                let (body, reloader) = (body.clone(), Arc::clone(&reloader));
                run::run(format!("case-{n}"), HANG, move || {
                    check_push(&body, &reloader)
                })
            }
        };
        let finding = |t: &mut Tally, kind: &str, message: String| {
            *t.shapes
                .entry(format!("{kind}: {}", shape(&message)))
                .or_default() += 1;
            if t.saved < MAX_SAVED {
                t.saved += 1;
                save(&args.out, kind, args.seed, n, &input, &message);
            }
        };
        match verdict {
            Verdict::Done(outcome) => {
                if outcome.accepted {
                    t.accepted += 1;
                } else {
                    t.rejected += 1;
                }
                if !outcome.unlocated.is_empty() {
                    t.unlocated += outcome.unlocated.len() as u64;
                    let text: Vec<String> =
                        outcome.unlocated.iter().map(|d| d.to_string()).collect();
                    let first = outcome.unlocated[0].message.clone();
                    *t.shapes
                        .entry(format!("no position: {}", shape(&first)))
                        .or_default() += 1;
                    if t.saved < MAX_SAVED {
                        t.saved += 1;
                        save(
                            &args.out,
                            "no-position",
                            args.seed,
                            n,
                            &input,
                            &text.join("\n"),
                        );
                    }
                }
            }
            Verdict::Panic(message) => {
                t.panics += 1;
                finding(&mut t, "panic", message);
            }
            Verdict::Hang(handle) => {
                t.hangs += 1;
                finding(&mut t, "hang", format!("still running after {HANG:?}"));
                hung.push(handle);
            }
        }
        hung.retain(|h| !h.is_finished());
        if hung.len() > MAX_HUNG_ALIVE {
            eprintln!(
                "fuzz_rules: stopping early: {} hung cases are still running",
                hung.len()
            );
            break;
        }
        if last_progress.elapsed() > Duration::from_secs(30) {
            last_progress = Instant::now();
            eprintln!(
                "  {:>4} s: {} cases, {} panics, {} hangs, {} without a position",
                started.elapsed().as_secs(),
                n + 1,
                t.panics,
                t.hangs,
                t.unlocated
            );
        }
        n += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    let total = t.sets + t.pushes;
    println!("fuzz_rules: seed {}, {:.0} s", args.seed, secs);
    println!(
        "  sets                      {total} ({} rule sets, {} push bodies)",
        t.sets, t.pushes
    );
    println!("  accepted                  {}", t.accepted);
    println!("  rejected                  {}", t.rejected);
    println!("  panics                    {}", t.panics);
    println!("  hangs                     {}", t.hangs);
    println!("  messages without position {}", t.unlocated);
    println!(
        "  sets/s                    {:.1}",
        total as f64 / secs.max(1e-9)
    );
    for (shape, count) in &t.shapes {
        println!("  {count:>6} × {shape}");
    }
    if t.panics + t.hangs + t.unlocated > 0 {
        println!(
            "  inputs saved in {} ({} of them)",
            args.out.display(),
            t.saved
        );
        process::exit(1);
    }
}
