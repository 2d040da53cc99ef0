//! One process per data directory: an exclusive lock on the directory itself, held for the
//! life of the [`DataDirLock`].
//!
//! Two processes on one directory would each run every message (the first one's fates are
//! not the second one's to know), so the second is refused, naming the first. The lock is
//! `flock`-style (`File::try_lock`) on the directory, not on a file in it: a lock file can be
//! deleted from under a live holder, and a second process would then lock a new one and run
//! beside it; the directory cannot go without the store in it. (Not the SQLite files: a
//! second descriptor on a database file that this process closes drops SQLite's own locks
//! on it.) The kernel drops the lock when the holder exits, however it exits, so a `kill -9`
//! leaves nothing to clean up. `DIR/rebound.lock` only holds the holder's PID, for the
//! message.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The file inside a data directory that names the process holding it (its PID).
pub const LOCK_FILE: &str = "rebound.lock";

/// Why a data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("data directory {} is in use by {}", dir.display(), holder(*pid))]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// The holder's PID, when it had written it.
        pid: Option<u32>,
    },
    /// The directory could not be locked, or the PID file written.
    #[error("cannot lock data directory {}: {source}", dir.display())]
    Io {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

fn holder(pid: Option<u32>) -> String {
    pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"))
}

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _dir: File,
}

impl DataDirLock {
    /// Locks `dir` (created if missing) for this process, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, LockError> {
        let io = |source| LockError::Io {
            dir: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        // A directory opens read-only, and flock works on its descriptor.
        let locked = File::open(dir).map_err(io)?;
        match locked.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                if let Ok(mut note) = File::open(dir.join(LOCK_FILE)) {
                    let _ = note.read_to_string(&mut text);
                }
                return Err(LockError::InUse {
                    dir: dir.to_owned(),
                    pid: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let mut note = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join(LOCK_FILE))
            .map_err(io)?;
        write!(note, "{}", std::process::id()).map_err(io)?;
        note.flush().map_err(io)?;
        Ok(DataDirLock { _dir: locked })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err();
        let me = std::process::id();
        assert!(
            matches!(err, LockError::InUse { pid: Some(p), .. } if p == me),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "data directory {} is in use by process {me}",
                dir.path().display()
            )
        );
        drop(first);
        DataDirLock::acquire(dir.path()).expect("free again");
    }

    #[test]
    fn deleting_the_pid_file_does_not_free_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err();
        assert!(matches!(err, LockError::InUse { pid: None, .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "data directory {} is in use by another process",
                dir.path().display()
            )
        );
        drop(first);
        DataDirLock::acquire(dir.path()).expect("free again");
    }
}
