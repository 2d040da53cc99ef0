//! The publisher's mark: the latest time a letter the broker accepted was stored at, and
//! the message ids of those accepted with that time (the letters of one decision share their
//! millisecond), kept in the data directory's `dead-letters-published` so that a start after a
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

/// The latest letters accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// When they were stored (dead-lettered), ms since the epoch.
    pub at_ms: u64,
    /// Their message ids.
    pub ids: Vec<String>,
}

impl Mark {
    /// The mark of `letter` alone.
    pub fn of(letter: &DeadLetter) -> Mark {
        Mark {
            at_ms: letter.at.as_millis(),
            ids: vec![letter.id().as_str().to_owned()],
        }
    }

    /// `mark` moved by `letter`, just accepted: to it if it is later, with it if it has the
    /// same time; an earlier one (stored out of order) leaves the mark where it is, since
    /// the mark never goes back.
    pub fn accepted(mark: Option<Mark>, letter: &DeadLetter) -> Mark {
        let at_ms = letter.at.as_millis();
        match mark {
            Some(mut mark) if mark.at_ms == at_ms => {
                if !mark.names(letter) {
                    mark.ids.push(letter.id().as_str().to_owned());
                }
                mark
            }
            Some(mark) if mark.at_ms > at_ms => mark,
            _ => Mark::of(letter),
        }
    }

    /// When the letter was stored.
    pub fn at(&self) -> Timestamp {
        Timestamp::from_millis(self.at_ms)
    }

    /// True if `letter` is one of those this mark names.
    pub fn names(&self, letter: &DeadLetter) -> bool {
        letter.at.as_millis() == self.at_ms && self.ids.iter().any(|id| id == letter.id().as_str())
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
            ids: vec!["orders/1-0".into()],
        };
        file.write(&mark).unwrap();
        assert_eq!(file.read(), Some(mark.clone()));
        let next = Mark {
            at_ms: mark.at_ms + 1,
            ids: vec!["orders/2-0".into(), "orders/3-0".into()],
        };
        file.write(&next).unwrap();
        assert_eq!(file.read(), Some(next));
        assert!(!dir.path().join(format!("{FILE}.tmp")).exists());
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert_eq!(file.read(), None);
    }
}

#[cfg(test)]
mod moves {
    use super::*;
    use rebound_engine::{GiveUpReason, Label, RuleRef, Version};
    use rebound_runtime::topology::{Failure, Message};

    fn letter(id: &str, at_ms: u64) -> DeadLetter {
        DeadLetter {
            message: Message::new(id, "PAYMENT", Vec::new()),
            failure: Failure::new("PAY_FAILED", ""),
            label: Label::from("L3"),
            reason: GiveUpReason::GiveUp,
            rule: RuleRef::Defaults,
            version: Version::from_hash(1),
            at: Timestamp::from_millis(at_ms),
        }
    }

    #[test]
    fn the_mark_moves_forward_only_and_names_every_letter_of_its_millisecond() {
        let (a, b, c, old) = (
            letter("a", 10),
            letter("b", 10),
            letter("c", 11),
            letter("z", 9),
        );
        let mark = Mark::accepted(None, &a);
        let mark = Mark::accepted(Some(mark), &b);
        assert!(mark.names(&a) && mark.names(&b));
        let mark = Mark::accepted(Some(mark), &b);
        assert_eq!(mark.ids.len(), 2, "a letter sent twice is named once");
        let mark = Mark::accepted(Some(mark), &c);
        assert_eq!(mark, Mark::of(&c));
        assert!(!mark.names(&a));
        let mark = Mark::accepted(Some(mark), &old);
        assert_eq!(
            mark,
            Mark::of(&c),
            "an earlier letter leaves it where it is"
        );
    }
}
