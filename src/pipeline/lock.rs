//! One process per data directory: an exclusive lock on `DIR/rebound.lock`, held for the life
//! of the [`DataDirLock`].
//!
//! Two processes on one directory would each run every message (the first one's fates are
//! not the second one's to know), so the second is refused, naming the first: the lock file
//! holds the holder's PID. The lock is `flock`-style (`File::try_lock`): the kernel drops it
//! when the holder exits, however it exits, so a `kill -9` leaves nothing to clean up.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file inside a data directory.
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
    /// The lock file could not be created or locked.
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
    _file: File,
}

impl DataDirLock {
    /// Locks `dir` (created if missing) for this process, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, LockError> {
        let io = |source| LockError::Io {
            dir: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::InUse {
                    dir: dir.to_owned(),
                    pid: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(DataDirLock { _file: file })
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
}
