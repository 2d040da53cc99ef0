//! A data directory that holds another run: the refusal, which names the ways out, and
//! `rebound run --fresh`, the way out that starts over in the same directory.
//!
//! A data directory keeps its run's `--messages`, `--time-scale` and whether it is keyed; a
//! command asking for another run there is refused ([`OtherRun`]) with the exact `--data` of a
//! directory of its own ([`own_dir`]: inside this one, named for the settings asked, so it
//! holds either nothing or that very run) and, for `run`, `--fresh`.
//!
//! With `--fresh`, under the directory's lock ([`DataDirLock`]: no other process runs in it),
//! [`start_over`] removes the files of the run it holds: the store (`rebound.db`: fates, dead
//! letters, scheduled retries, the source's position) and the pipeline's own records
//! (`pipeline.db`: the run's parameters, its sessions, the orders written), each with the
//! companions SQLite keeps beside it (`-wal`, `-shm`, `-journal`). Nothing else is touched:
//! not a file of another name, not a directory (another run's `--data` may live inside this
//! one), not the lock file the caller holds.

use std::path::{Path, PathBuf};

use rebound_runtime::store::DB_FILE;

use super::db::{PIPELINE_DB, PipelineDb, RunRecord};
use super::lock::DataDirLock;

/// A command asked for a run that is not the one its data directory holds.
#[derive(Debug)]
pub struct OtherRun {
    /// The data directory.
    pub dir: PathBuf,
    /// The run it holds.
    pub found: RunRecord,
    /// The messages asked for (`None`: unbounded, as `serve` asks).
    pub messages: Option<u64>,
    /// A keyed run asked for.
    pub keyed: bool,
    /// The time scale asked for.
    pub time_scale: f64,
}

impl OtherRun {
    /// `--fresh` is `run`'s: offered when the run asked for is bounded (`serve`'s is not).
    fn offers_fresh(&self) -> bool {
        self.messages.is_some()
    }
}

/// A run's messages as the refusal names them: `2000 messages`, `20000 keyed messages`,
/// `unbounded orders`.
pub(crate) fn describe(messages: Option<u64>, keyed: bool) -> String {
    let what = if keyed { "keyed messages" } else { "messages" };
    messages.map_or_else(
        || format!("unbounded {}", if keyed { what } else { "orders" }),
        |n| format!("{n} {what}"),
    )
}

/// The settings that continue `run` (the flags that make it): `--messages 2000 --keyed
/// --time-scale 100`, or `serve`'s `--time-scale 1`.
fn settings(run: &RunRecord) -> String {
    let mut flags = Vec::new();
    if let Some(n) = run.messages {
        flags.push(format!("--messages {n}"));
    }
    if run.keyed {
        flags.push("--keyed".to_owned());
    }
    flags.push(format!("--time-scale {}", run.time_scale));
    let command = if run.messages.is_some() {
        "run"
    } else {
        "serve"
    };
    format!("`rebound {command} {}`", flags.join(" "))
}

/// A data directory of its own for the run asked: inside `dir`, named for its settings
/// (`20000-keyed-x100`, `unbounded-x1`), so that it holds nothing yet or that very run.
pub fn own_dir(dir: &Path, messages: Option<u64>, keyed: bool, time_scale: f64) -> PathBuf {
    let count = messages.map_or_else(|| "unbounded".to_owned(), |n| n.to_string());
    let keyed = if keyed { "-keyed" } else { "" };
    dir.join(format!("{count}{keyed}-x{time_scale}"))
}

impl std::fmt::Display for OtherRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let found = &self.found;
        let finished = found.finished_ms.is_some();
        write!(
            f,
            "{} holds {} run of {} at time scale {}, not {} at {}: ",
            self.dir.display(),
            if finished {
                "a finished"
            } else {
                "an unfinished"
            },
            describe(found.messages, found.keyed),
            found.time_scale,
            describe(self.messages, self.keyed),
            self.time_scale,
        )?;
        let own = own_dir(&self.dir, self.messages, self.keyed, self.time_scale);
        let mut ways = Vec::new();
        if !finished {
            ways.push(format!("continue it with {}", settings(found)));
        }
        ways.push(format!(
            "pass --data {} for a run of its own",
            own.display()
        ));
        if self.offers_fresh() {
            ways.push(format!(
                "pass --fresh to remove it and start this one in {}",
                self.dir.display()
            ));
        }
        match ways.split_last() {
            Some((last, [])) => f.write_str(last),
            Some((last, rest)) => write!(f, "{}, or {last}", rest.join(", ")),
            None => Ok(()),
        }
    }
}

impl std::error::Error for OtherRun {}

/// Why a run could not be removed to start over.
#[derive(Debug, thiserror::Error)]
#[error("cannot remove {} to start over (--fresh): {source}", path.display())]
pub struct StartOverError {
    /// The file that stayed.
    pub path: PathBuf,
    /// The cause.
    pub source: std::io::Error,
}

/// What [`start_over`] removed: the run it held (when `pipeline.db` could still say), and the
/// files.
#[derive(Debug, Default)]
pub struct Removed {
    /// The run the directory held, if its record could be read.
    pub run: Option<RunRecord>,
    /// The files removed, in the order they were.
    pub files: Vec<PathBuf>,
}

/// The files of a run in a data directory: each database and its SQLite companions.
pub fn run_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for db in [PIPELINE_DB, DB_FILE] {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            files.push(dir.join(format!("{db}{suffix}")));
        }
    }
    files
}

/// Removes the run `dir` holds (nothing, if it holds none); `_held` is the proof that this
/// process owns the directory. Blocking.
pub fn start_over(dir: &Path, _held: &DataDirLock) -> Result<Removed, StartOverError> {
    let mut removed = Removed::default();
    if dir.join(PIPELINE_DB).exists() {
        // A record that cannot be read (a damaged file) is no reason to keep it: starting
        // over is the way out of it.
        removed.run = PipelineDb::open(dir)
            .ok()
            .and_then(|db| db.run().ok().flatten());
    }
    for path in run_files(dir) {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.files.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StartOverError { path, source }),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(messages: Option<u64>, keyed: bool, scale: f64, finished: bool) -> RunRecord {
        RunRecord {
            messages,
            keyed,
            time_scale: scale,
            created_ms: 1,
            finished_ms: finished.then_some(2),
        }
    }

    fn refusal(found: RunRecord, messages: Option<u64>, keyed: bool, scale: f64) -> String {
        OtherRun {
            dir: "rebound-data".into(),
            found,
            messages,
            keyed,
            time_scale: scale,
        }
        .to_string()
    }

    #[test]
    fn the_refusal_names_a_directory_of_its_own_and_fresh() {
        assert_eq!(
            refusal(
                record(Some(50_000), false, 100.0, true),
                Some(20_000),
                true,
                100.0
            ),
            "rebound-data holds a finished run of 50000 messages at time scale 100, not 20000 \
             keyed messages at 100: pass --data rebound-data/20000-keyed-x100 for a run of its \
             own, or pass --fresh to remove it and start this one in rebound-data"
        );
        assert_eq!(
            refusal(
                record(Some(50_000), true, 100.0, false),
                Some(50_000),
                false,
                100.0
            ),
            "rebound-data holds an unfinished run of 50000 keyed messages at time scale 100, \
             not 50000 messages at 100: continue it with `rebound run --messages 50000 --keyed \
             --time-scale 100`, pass --data rebound-data/50000-x100 for a run of its own, or \
             pass --fresh to remove it and start this one in rebound-data"
        );
    }

    #[test]
    fn serve_is_offered_a_directory_of_its_own_not_fresh() {
        assert_eq!(
            refusal(record(Some(2000), false, 100.0, true), None, false, 1.0),
            "rebound-data holds a finished run of 2000 messages at time scale 100, not \
             unbounded orders at 1: pass --data rebound-data/unbounded-x1 for a run of its own"
        );
        assert_eq!(
            refusal(record(None, false, 1.0, false), None, false, 10.0),
            "rebound-data holds an unfinished run of unbounded orders at time scale 1, not \
             unbounded orders at 10: continue it with `rebound serve --time-scale 1`, or pass \
             --data rebound-data/unbounded-x10 for a run of its own"
        );
    }

    #[test]
    fn a_fractional_scale_names_its_directory_too() {
        assert_eq!(
            own_dir(Path::new("/tmp/r"), Some(300), false, 2.5),
            Path::new("/tmp/r/300-x2.5")
        );
    }

    #[test]
    fn only_the_runs_files_go_and_everything_else_stays() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        {
            let db = PipelineDb::open(data).unwrap();
            db.create_run(Some(300), false, 100.0, 1).unwrap();
            rebound_runtime::store::SqliteStore::open(data).unwrap();
        }
        std::fs::write(data.join("notes.txt"), "mine").unwrap();
        std::fs::create_dir(data.join("keyed")).unwrap();
        std::fs::write(data.join("keyed").join(PIPELINE_DB), "another run").unwrap();
        let lock = DataDirLock::acquire(data).unwrap();

        let removed = start_over(data, &lock).unwrap();

        assert_eq!(removed.run.map(|r| r.messages), Some(Some(300)));
        assert!(removed.files.contains(&data.join(PIPELINE_DB)));
        assert!(removed.files.contains(&data.join(DB_FILE)));
        for file in run_files(data) {
            assert!(!file.exists(), "{} stayed", file.display());
        }
        assert_eq!(
            std::fs::read_to_string(data.join("notes.txt")).unwrap(),
            "mine"
        );
        assert!(data.join("keyed").join(PIPELINE_DB).exists());
        assert!(data.join(super::super::lock::LOCK_FILE).exists());
        // An empty directory has nothing to remove.
        let again = start_over(data, &lock).unwrap();
        assert!(again.run.is_none() && again.files.is_empty(), "{again:?}");
    }

    #[test]
    fn a_damaged_record_is_removed_all_the_same() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PIPELINE_DB), "not a database").unwrap();
        let lock = DataDirLock::acquire(dir.path()).unwrap();
        let removed = start_over(dir.path(), &lock).unwrap();
        assert!(removed.run.is_none());
        assert!(!dir.path().join(PIPELINE_DB).exists());
    }
}
