//! The publisher's mark: the last letter the broker accepted (when it was stored, and its
//! message id), kept in the data directory's `dead-letters-published` so that a start after a
//! crash or a stop publishes every letter stored at or after it (the catch-up). The file is
//! written whole to a temporary file and renamed over the old one, so it is always one mark
//! or the other. A file that cannot be read is no mark: every stored letter is published
//! again (at-least-once: twice is allowed, never zero times).

use std::io;
use std::path::{Path, PathBuf};

use rebound_runtime::store::DeadLetter;
use rebound_runtime::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The file's name in the data directory.
pub const FILE: &str = "dead-letters-published";

/// The last letter accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// When it was stored (dead-lettered), ms since the epoch.
    pub at_ms: u64,
    /// Its message id.
    pub id: String,
}

impl Mark {
    /// The mark of `letter`.
    pub fn of(letter: &DeadLetter) -> Mark {
        Mark {
            at_ms: letter.at.as_millis(),
            id: letter.id().as_str().to_owned(),
        }
    }

    /// When the letter was stored.
    pub fn at(&self) -> Timestamp {
        Timestamp::from_millis(self.at_ms)
    }

    /// True if `letter` is the one this mark names.
    pub fn names(&self, letter: &DeadLetter) -> bool {
        letter.at.as_millis() == self.at_ms && letter.id().as_str() == self.id
    }
}

/// The mark file of one data directory.
#[derive(Clone, Debug)]
pub struct MarkFile {
    path: PathBuf,
}

impl MarkFile {
    /// `dir/dead-letters-published`.
    pub fn in_dir(dir: &Path) -> MarkFile {
        MarkFile {
            path: dir.join(FILE),
        }
    }

    /// The mark, or `None` if there is none yet (or it cannot be read: said in a log line).
    pub fn read(&self) -> Option<Mark> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, "cannot read the dead letters' publish mark: every stored letter is published again");
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(mark) => Some(mark),
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, "the dead letters' publish mark is not one: every stored letter is published again");
                None
            }
        }
    }

    /// Writes `mark`: a temporary file beside it, renamed over it.
    pub fn write(&self, mark: &Mark) -> io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        let text = serde_json::to_string(mark).map_err(io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_read_back_as_written_and_a_bad_file_is_no_mark() {
        let dir = tempfile::tempdir().unwrap();
        let file = MarkFile::in_dir(dir.path());
        assert_eq!(file.read(), None);
        let mark = Mark {
            at_ms: 1_700_000_000_123,
            id: "orders/1-0".into(),
        };
        file.write(&mark).unwrap();
        assert_eq!(file.read(), Some(mark.clone()));
        let next = Mark {
            at_ms: mark.at_ms + 1,
            id: "orders/2-0".into(),
        };
        file.write(&next).unwrap();
        assert_eq!(file.read(), Some(next));
        assert!(!dir.path().join(format!("{FILE}.tmp")).exists());
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert_eq!(file.read(), None);
    }
}
