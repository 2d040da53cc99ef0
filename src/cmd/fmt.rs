//! `rebound fmt`: rewrite rule files and rule-test files in their canonical form, or with
//! `--check` only say which ones are not.

use crate::Outcome;
use rebound_engine::SourceFile;
use rebound_engine::fmt::{FileKind, FmtError, format, same_decisions};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Format rule files and rule-test files the canonical way, keeping every comment.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  rebound fmt --rules rules\n  \
rebound fmt --check\n\n\
Formats DIR/*.yaml (rule files) and DIR/tests/*.yaml (rule-test files), or the FILES given\n\
(a file in a directory named 'tests' is a test file): keys in the order of the spec, short\n\
maps under backoff, redrive, given and expect as flow maps, one space after ':', no trailing\n\
whitespace, one blank line at most, one newline at the end; indentation is left as written.\n\
Every comment is kept. An edit is made only when the file still reads as the same YAML, and a\n\
formatted set is written only when it compiles and decides exactly as before.\n\
Prints each file it changes (with --check: that would change, and the first line that\n\
differs). Exit status: 0 nothing to change, 1 --check found a file to change or a file is\n\
not valid YAML, 2 I/O error or a formatted set that would decide differently (nothing written).")]
pub struct Args {
    /// The rule set directory (its tests are in DIR/tests); ignored when FILES are given.
    #[arg(long, default_value = "rules")]
    rules: PathBuf,
    /// Write nothing; list the files that would change and exit 1 if there are any.
    #[arg(long)]
    check: bool,
    /// Print one JSON document instead of text: {"changed": [FILE, …], "check": BOOL}.
    #[arg(long)]
    json: bool,
    /// Files to format instead of the whole set.
    files: Vec<PathBuf>,
}

/// One file: where it is, what it holds, its text and its formatted text.
struct Job {
    path: PathBuf,
    kind: FileKind,
    before: String,
    after: String,
}

pub fn run(args: Args) -> Outcome {
    let paths = match targets(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Outcome::Trouble;
        }
    };
    let mut jobs = Vec::new();
    let mut broken = false;
    for (path, kind) in paths {
        let before = match fs::read(&path).map(String::from_utf8) {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => {
                eprintln!("{}: error: not valid UTF-8", path.display());
                broken = true;
                continue;
            }
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", path.display());
                return Outcome::Trouble;
            }
        };
        match format(&before, kind) {
            Ok(after) => jobs.push(Job {
                path,
                kind,
                before,
                after,
            }),
            Err(FmtError::NotYaml(e)) => {
                eprintln!(
                    "{}: error: not valid YAML, left as it is: {e}",
                    path.display()
                );
                broken = true;
            }
        }
    }
    if let Err(e) = sets_decide_alike(&jobs) {
        eprintln!("error: {e}; nothing was written (please report this as a bug of rebound fmt)");
        return Outcome::Trouble;
    }
    let changed: Vec<&Job> = jobs.iter().filter(|j| j.before != j.after).collect();
    for job in &changed {
        if args.check {
            if !args.json {
                println!("{}", job.path.display());
                println!("{}", first_difference(&job.before, &job.after));
            }
        } else if let Err(e) = write_atomically(&job.path, &job.after) {
            eprintln!("error: cannot write {}: {e}", job.path.display());
            return Outcome::Trouble;
        } else if !args.json {
            println!("{}", job.path.display());
        }
    }
    if args.json {
        let names: Vec<String> = changed
            .iter()
            .map(|j| j.path.display().to_string())
            .collect();
        println!(
            "{}",
            serde_json::json!({ "changed": names, "check": args.check })
        );
    }
    if broken || (args.check && !changed.is_empty()) {
        Outcome::Wrong
    } else {
        Outcome::Ok
    }
}

/// The files to format, each with its kind.
fn targets(args: &Args) -> std::io::Result<Vec<(PathBuf, FileKind)>> {
    if !args.files.is_empty() {
        return Ok(args.files.iter().map(|p| (p.clone(), kind_of(p))).collect());
    }
    let rules = rebound_engine::read_dir(&args.rules)?;
    let tests = rebound_engine::ruletest::read_test_files(&args.rules)?;
    let as_paths = |files: Vec<SourceFile>, kind| {
        files
            .into_iter()
            .map(move |f| (PathBuf::from(f.path), kind))
            .collect::<Vec<_>>()
    };
    let mut out = as_paths(rules, FileKind::Rules);
    out.extend(as_paths(tests, FileKind::Tests));
    Ok(out)
}

fn kind_of(path: &Path) -> FileKind {
    let in_tests = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "tests");
    if in_tests {
        FileKind::Tests
    } else {
        FileKind::Rules
    }
}

/// For each directory of rule files that change: its set as it is and as formatted compile
/// alike (both or neither) and decide alike.
fn sets_decide_alike(jobs: &[Job]) -> Result<(), String> {
    let mut dirs: BTreeMap<PathBuf, Vec<&Job>> = BTreeMap::new();
    for job in jobs {
        if job.kind == FileKind::Rules && job.before != job.after {
            let dir = job.path.parent().unwrap_or(Path::new(".")).to_path_buf();
            dirs.entry(dir).or_default().push(job);
        }
    }
    for (dir, changed) in dirs {
        let mut before = rebound_engine::read_dir(&dir)
            .map_err(|e| format!("cannot read the rule set {}: {e}", dir.display()))?;
        for job in &changed {
            let name = file_name(&job.path);
            if !before.iter().any(|f| f.name == name) {
                before.push(SourceFile::new(
                    name,
                    job.path.display().to_string(),
                    job.before.clone(),
                ));
            }
        }
        let after: Vec<SourceFile> = before
            .iter()
            .map(
                |f| match changed.iter().find(|j| file_name(&j.path) == f.name) {
                    Some(job) => SourceFile::new(f.name.clone(), f.path.clone(), job.after.clone()),
                    None => f.clone(),
                },
            )
            .collect();
        let names = changed
            .iter()
            .map(|j| j.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        match (
            rebound_engine::compile(before),
            rebound_engine::compile(after),
        ) {
            (Ok(a), Ok(b)) => same_decisions(&a, &b)
                .map_err(|e| format!("formatting {names} would change a decision: {e}"))?,
            (Err(_), Err(_)) => {}
            _ => {
                return Err(format!(
                    "formatting {names} would change whether the set compiles"
                ));
            }
        }
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `  line N: - OLD` / `  line N: + NEW` for the first line that differs.
fn first_difference(before: &str, after: &str) -> String {
    let (b, a): (Vec<&str>, Vec<&str>) =
        (before.split('\n').collect(), after.split('\n').collect());
    let n = (0..b.len().max(a.len()))
        .find(|&i| b.get(i) != a.get(i))
        .unwrap_or(0);
    let show = |l: Option<&&str>| l.map_or("(end of file)".to_string(), |l| format!("{l:?}"));
    format!(
        "  line {}: - {}\n  line {}: + {}",
        n + 1,
        show(b.get(n)),
        n + 1,
        show(a.get(n))
    )
}

/// Writes `text` to a temporary file beside `path` and renames it over `path`, so a reader
/// never sees half a file; the file keeps its permissions.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!(".{}.rebound-fmt.tmp", file_name(path)));
    fs::write(&tmp, text)?;
    if let Ok(meta) = fs::metadata(path) {
        fs::set_permissions(&tmp, meta.permissions())?;
    }
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}
