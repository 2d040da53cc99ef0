//! The reload pipeline: every new set — from the directory, a push, a pull or a rollback —
//! is loaded, validated and compiled whole, and only then swapped into the
//! [`PolicyHandle`]. Each attempt lands in the [`History`] and is logged.
//!
//! One mutex serialises every reload. That is what makes a push's `If-Match` a true
//! compare-and-swap, and what makes the watcher hold off while a push writes its files: the
//! watcher reads the directory under the same mutex, so it sees either all of the old files
//! or all of the new ones, never a mix. Deciding never takes the mutex: it reads the handle's
//! atomic pointer.

mod canary;

use super::files::{WriteError, check_name, shown, write_set};
use super::history::{Actor, History, HistoryEntry, Outcome};
pub use super::outcomes::{
    IfMatch, PushError, Pushed, ReloadError, ReloadListener, ReloadOptions, Reloaded,
    RollbackError, SetCheck,
};
use super::record::{Publication, PublishError, SetRecord};
use crate::compile::compile;
use crate::diag::{Diagnostic, Rejected};
use crate::handle::{PolicyHandle, Source, Status};
use crate::load::{SourceFile, read_dir, version_of};
use crate::set::CompiledSet;
use crate::types::Version;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

/// Everything that only one reload at a time may touch.
struct Guarded {
    /// Previous accepted sets, the most recent first.
    previous: VecDeque<Arc<CompiledSet>>,
    /// The version of the last directory contents that failed, so that touching a broken
    /// file again does not log the same errors again.
    last_rejected_dir: Option<Version>,
}

/// The reload pipeline over one rules directory and the handle that decides with it.
///
/// ```
/// use rebound_engine::reload::{Reloader, ReloadOptions, Source};
/// use std::collections::BTreeMap;
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.yaml"), "version: 1\n").unwrap();
/// let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
///
/// let yaml = "version: 1\nrules:\n  - id: fast\n    retry: { backoff: { fixed: 100ms } }\n";
/// let files = BTreeMap::from([("a.yaml".to_string(), yaml.to_string())]);
/// let pushed = reloader.push(files, None, Source::Push).unwrap();
/// assert_eq!(reloader.handle().current().version(), &pushed.version);
/// assert_eq!(std::fs::read_to_string(dir.path().join("a.yaml")).unwrap(), yaml);
/// ```
pub struct Reloader {
    dir: PathBuf,
    handle: Arc<PolicyHandle>,
    guarded: Mutex<Guarded>,
    history: Mutex<History>,
    keep_previous: usize,
    on_reload: Option<ReloadListener>,
    record: Option<Arc<dyn SetRecord>>,
    check: Option<super::outcomes::SetCheck>,
}

impl fmt::Debug for Reloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloader")
            .field("dir", &self.dir)
            .field("version", self.handle.current().version())
            .finish_non_exhaustive()
    }
}

impl Reloader {
    /// Loads the set in `dir` and starts the pipeline with it.
    pub fn open(dir: &Path, options: ReloadOptions) -> Result<Reloader, ReloadError> {
        let files = read_dir(dir).map_err(|source| ReloadError::Read {
            dir: dir.to_path_buf(),
            source,
        })?;
        let set = compile(files).map_err(ReloadError::Rejected)?;
        Ok(Reloader::new(dir, set, options))
    }

    /// Starts the pipeline over `dir` with `set`, already loaded from there. The start-up
    /// load is the first history entry (source `file`); it counts as a previous set for
    /// rollback once another set is accepted.
    pub fn new(dir: &Path, set: CompiledSet, options: ReloadOptions) -> Reloader {
        let handle = PolicyHandle::new(set);
        let status = handle.status();
        let reloader = Reloader {
            dir: dir.to_path_buf(),
            handle: Arc::new(handle),
            guarded: Mutex::new(Guarded {
                previous: VecDeque::new(),
                last_rejected_dir: None,
            }),
            history: Mutex::new(History::new(options.history_limit, options.files_kept)),
            keep_previous: options.keep_previous.max(1),
            on_reload: options.on_reload,
            record: options.record,
            check: options.check,
        };
        reloader.record(
            HistoryEntry {
                version: *status.set.version(),
                outcome: Outcome::Accepted,
                source: status.source,
                at: status.loaded_at,
                errors: Vec::new(),
                by: None,
                arms: None,
            },
            Some(status.set.files()),
        );
        reloader
    }

    /// The handle every decision goes through.
    pub fn handle(&self) -> &Arc<PolicyHandle> {
        &self.handle
    }

    /// The rules directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The set in force, with when and from where it came: the handle's, so it is always
    /// the set that decides.
    pub fn status(&self) -> Arc<Status> {
        self.handle.status()
    }

    /// The recorded reload attempts, newest first.
    pub fn history(&self) -> Vec<HistoryEntry> {
        lock(&self.history).entries().cloned().collect()
    }

    /// The files of `version`, if it is one of the last [`FILES_KEPT`](super::FILES_KEPT)
    /// accepted versions (by default; [`ReloadOptions::files_kept`]), for a diff between two
    /// of them or a rollback to it.
    pub fn history_files(&self, version: &Version) -> Option<Arc<[SourceFile]>> {
        lock(&self.history).files(version)
    }

    /// The versions kept for rollback, the one a rollback would restore first.
    pub fn previous_versions(&self) -> Vec<Version> {
        lock(&self.guarded)
            .previous
            .iter()
            .map(|s| *s.version())
            .collect()
    }

    /// Reads the directory again and swaps the set in when it is new and valid.
    ///
    /// Contents identical to the set in force, or to the last rejected contents, are a
    /// no-op. A rejected set leaves the current one in force and is logged with its errors;
    /// so does a directory that cannot be read (recorded as a rejected attempt of no files).
    pub fn reload_dir(&self) -> Result<Reloaded, ReloadError> {
        let mut guarded = lock(&self.guarded);
        let files = read_dir(&self.dir).map_err(|source| {
            // Counted and kept in the history as a rejected attempt: the files on disk may
            // now differ from the set in force, and an operator must be able to see it.
            let dir = self.dir.display().to_string();
            let message = format!("cannot read the rule set in {dir}: {source}");
            let unread = vec![Diagnostic::error(dir, None, message)];
            self.reject(version_of(&[]), Source::File, 0, unread);
            ReloadError::Read {
                dir: self.dir.clone(),
                source,
            }
        })?;
        let version = version_of(&files);
        if &version == self.handle.current().version()
            || guarded.last_rejected_dir.as_ref() == Some(&version)
        {
            tracing::debug!(%version, "rules directory unchanged; nothing to reload");
            return Ok(Reloaded::Unchanged(version));
        }
        let count = files.len();
        match self.compile(files) {
            Ok(set) => {
                if let Err(e) = self.publish(&set, Source::File, None) {
                    // Refused by the fleet's record: the edit is tried again when touched.
                    let dir = self.dir.display().to_string();
                    self.reject(
                        version,
                        Source::File,
                        count,
                        vec![Diagnostic::error(dir, None, e.to_string())],
                    );
                    return Ok(Reloaded::Unchanged(*self.handle.current().version()));
                }
                self.install(&mut guarded, Arc::new(set), Source::File, None);
                Ok(Reloaded::Accepted(version))
            }
            Err(rejected) => {
                guarded.last_rejected_dir = Some(version);
                let errors = rejected.errors().cloned().collect();
                self.reject(version, Source::File, count, errors);
                Err(ReloadError::Rejected(rejected))
            }
        }
    }

    /// Validates `files` (name → content), writes them into the rules directory atomically
    /// (removing rule files they do not name), then swaps them in.
    ///
    /// With `if_match`, the push goes through only if the current version satisfies it.
    /// A set identical to the current one changes nothing (it is still written, in case the
    /// directory drifted, but identical files are not touched).
    pub fn push(
        &self,
        files: BTreeMap<String, String>,
        if_match: Option<&IfMatch>,
        source: Source,
    ) -> Result<Pushed, PushError> {
        self.push_as(files, if_match, source, None)
    }

    /// [`push`](Self::push), recording `by` (who pushed, and why) in the history entry of
    /// the accepted set.
    pub fn push_as(
        &self,
        files: BTreeMap<String, String>,
        if_match: Option<&IfMatch>,
        source: Source,
        by: Option<Actor>,
    ) -> Result<Pushed, PushError> {
        let mut guarded = lock(&self.guarded);
        let current = self.handle.current();
        if let Some(precondition) = if_match
            && !precondition.matches(current.version())
        {
            return Err(PushError::Conflict {
                current: *current.version(),
            });
        }
        let count = files.len();
        let sources = match to_sources(files) {
            Ok(sources) => sources,
            Err(Refused {
                version,
                file,
                error,
            }) => {
                let diag = Diagnostic::error(file, None, error.to_string());
                self.reject(version, source, count, vec![diag]);
                return Err(error);
            }
        };
        let version = version_of(&sources);
        if &version == current.version() {
            write_set(&self.dir, &sources)
                .map_err(|e| self.write_error(&version, source, count, e))?;
            tracing::info!(%version, %source, "pushed set is already in force; nothing changed");
            return Ok(Pushed {
                version,
                changed: false,
                warnings: current.warnings().to_vec(),
            });
        }
        let set = match self.compile(sources) {
            Ok(set) => set,
            Err(rejected) => {
                self.reject(version, source, count, rejected.errors().cloned().collect());
                return Err(PushError::Rejected(rejected));
            }
        };
        let expected = if_match.map(|_| *current.version());
        if let Err(e) = self.publish(&set, source, expected) {
            return Err(match e {
                PublishError::Conflict { current } => PushError::Conflict { current },
                e @ PublishError::Unavailable(_) => PushError::Unpublished(e.to_string()),
            });
        }
        write_set(&self.dir, set.files())
            .map_err(|e| self.write_error(&version, source, count, e))?;
        let warnings = set.warnings().to_vec();
        self.install(&mut guarded, Arc::new(set), source, by);
        Ok(Pushed {
            version,
            changed: true,
            warnings,
        })
    }

    /// A dry run of [`push`](Self::push): whether `files` would be accepted now. Nothing
    /// changes and nothing is recorded.
    pub fn validate(
        &self,
        files: BTreeMap<String, String>,
        if_match: Option<&IfMatch>,
    ) -> Result<Pushed, PushError> {
        let current = self.handle.current();
        if let Some(precondition) = if_match
            && !precondition.matches(current.version())
        {
            return Err(PushError::Conflict {
                current: *current.version(),
            });
        }
        let sources = to_sources(files).map_err(|r| r.error)?;
        let version = version_of(&sources);
        let set = self.compile(sources).map_err(PushError::Rejected)?;
        Ok(Pushed {
            changed: &version != current.version(),
            version,
            warnings: set.warnings().to_vec(),
        })
    }

    /// Goes back to the previous accepted set (the start-up set counts as one), writes it
    /// into the rules directory and swaps it in. The set it replaces is dropped, so repeated
    /// rollbacks walk further back.
    pub fn rollback(&self) -> Result<Version, RollbackError> {
        self.rollback_as(None)
    }

    /// [`rollback`](Self::rollback), recording `by` (who rolled back, and why) in the history.
    pub fn rollback_as(&self, by: Option<Actor>) -> Result<Version, RollbackError> {
        self.step_back(&mut lock(&self.guarded), by)
    }

    /// Goes back to `version`, one of the accepted versions whose files the history keeps
    /// ([`history_files`](Self::history_files)): written into the rules directory and swapped
    /// in as a rollback (source [`Source::Rollback`]).
    ///
    /// When `version` is the one a plain [`rollback`](Self::rollback) would restore, this is
    /// that rollback. Otherwise it is a step forward to an older set: the set it replaces is
    /// kept, so a plain rollback afterwards returns to it. The version in force is a no-op.
    ///
    /// ```
    /// use rebound_engine::reload::{Reloader, ReloadOptions, Source};
    /// use std::collections::BTreeMap;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.yaml"), "version: 1\n").unwrap();
    /// let reloader = Reloader::open(dir.path(), ReloadOptions::default()).unwrap();
    /// let first = *reloader.handle().current().version();
    /// for delay in ["100ms", "200ms"] {
    ///     let yaml = format!("version: 1\nrules:\n  - id: r\n    retry: {{ backoff: {{ fixed: {delay} }} }}\n");
    ///     reloader.push(BTreeMap::from([("a.yaml".into(), yaml)]), None, Source::Push).unwrap();
    /// }
    /// assert_eq!(reloader.rollback_to(&first).unwrap(), first);
    /// assert_eq!(std::fs::read_to_string(dir.path().join("a.yaml")).unwrap(), "version: 1\n");
    /// assert_eq!(reloader.history()[0].source, Source::Rollback);
    /// ```
    pub fn rollback_to(&self, version: &Version) -> Result<Version, RollbackError> {
        self.rollback_to_as(version, None)
    }

    /// [`rollback_to`](Self::rollback_to), recording `by` (who rolled back, and why) in the
    /// history.
    pub fn rollback_to_as(
        &self,
        version: &Version,
        by: Option<Actor>,
    ) -> Result<Version, RollbackError> {
        let mut guarded = lock(&self.guarded);
        let current = *self.handle.current().version();
        if *version == current {
            return Ok(current);
        }
        if guarded.previous.front().map(|s| s.version()) == Some(version) {
            return self.step_back(&mut guarded, by);
        }
        let files = self
            .history_files(version)
            .ok_or(RollbackError::NotKept(*version))?;
        // A set still kept for a plain rollback needs no compiling; any other is compiled again
        // from its files (it compiled when it was accepted, and compiling is deterministic).
        let kept = guarded.previous.iter().find(|s| s.version() == version);
        let target = match kept {
            Some(set) => Arc::clone(set),
            None => match self.compile(files.to_vec()) {
                Ok(set) => Arc::new(set),
                Err(rejected) => {
                    let errors = rejected.errors().cloned().collect();
                    self.reject(*version, Source::Rollback, files.len(), errors);
                    return Err(RollbackError::Rejected(rejected));
                }
            },
        };
        if let Err(e) = self.publish(&target, Source::Rollback, Some(current)) {
            return Err(RollbackError::Unpublished(e.to_string()));
        }
        if let Err(e) = write_set(&self.dir, target.files()) {
            let source = e.into_io();
            let count = target.files().len();
            self.record_write_failure(*version, Source::Rollback, count, &source);
            return Err(RollbackError::Write {
                dir: self.dir.clone(),
                source,
            });
        }
        self.install(&mut guarded, target, Source::Rollback, by);
        Ok(*version)
    }

    /// [`rollback`](Self::rollback), under the reload lock.
    fn step_back(
        &self,
        guarded: &mut Guarded,
        by: Option<Actor>,
    ) -> Result<Version, RollbackError> {
        let Some(target) = guarded.previous.pop_front() else {
            return Err(RollbackError::NoPrevious);
        };
        let version = *target.version();
        let current = *self.handle.current().version();
        if let Err(e) = self.publish(&target, Source::Rollback, Some(current)) {
            guarded.previous.push_front(target);
            return Err(RollbackError::Unpublished(e.to_string()));
        }
        if let Err(e) = write_set(&self.dir, target.files()) {
            // The names were written before; whatever stops them now is the directory's fault.
            let source = e.into_io();
            let count = target.files().len();
            self.record_write_failure(version, Source::Rollback, count, &source);
            guarded.previous.push_front(target);
            return Err(RollbackError::Write {
                dir: self.dir.clone(),
                source,
            });
        }
        let now = SystemTime::now();
        self.handle
            .install(Arc::clone(&target), Source::Rollback, now);
        // The directory holds something else now: broken contents seen before are news again.
        guarded.last_rejected_dir = None;
        self.announce(&target, Source::Rollback, now, by);
        Ok(version)
    }

    /// Takes `files`, the shared record's set, as [`push`](Self::push) would (validated,
    /// written into the rules directory, swapped in, source [`Source::Fleet`]), without
    /// publishing it back. A set that does not compile leaves the set in force.
    pub fn adopt(&self, files: BTreeMap<String, String>) -> Result<Pushed, PushError> {
        self.push(files, None, Source::Fleet)
    }

    /// Compiles `files`, and rejects the set if the options' check finds errors in it.
    fn compile(&self, files: Vec<SourceFile>) -> Result<CompiledSet, Rejected> {
        let set = compile(files)?;
        let Some(check) = &self.check else {
            return Ok(set);
        };
        let errors = check(&set);
        if errors.iter().any(Diagnostic::is_error) {
            return Err(Rejected(errors));
        }
        Ok(set)
    }

    /// Asks the record, if any, to take `set` (not for a set adopted from it).
    fn publish(
        &self,
        set: &CompiledSet,
        source: Source,
        expected: Option<Version>,
    ) -> Result<(), PublishError> {
        match &self.record {
            Some(record) if source != Source::Fleet => record.publish(&Publication {
                version: *set.version(),
                files: set.files(),
                source,
                expected,
            }),
            _ => Ok(()),
        }
    }

    /// Swaps `set` in, keeps the replaced one for rollback, and records the attempt.
    fn install(
        &self,
        guarded: &mut Guarded,
        set: Arc<CompiledSet>,
        source: Source,
        by: Option<Actor>,
    ) {
        let now = SystemTime::now();
        let replaced = self.handle.install(Arc::clone(&set), source, now);
        guarded.previous.push_front(replaced);
        guarded.previous.truncate(self.keep_previous);
        // The directory holds something else now: broken contents seen before are news again.
        guarded.last_rejected_dir = None;
        self.announce(&set, source, now, by);
    }

    /// Logs a set just swapped in (at `now`) and records it as accepted, with its files and
    /// who asked for it.
    fn announce(&self, set: &CompiledSet, source: Source, now: SystemTime, by: Option<Actor>) {
        let version = *set.version();
        tracing::info!(
            %version,
            %source,
            files = set.files().len(),
            rules = set.rules().len(),
            warnings = set.warnings().len(),
            "rule set accepted"
        );
        let entry = HistoryEntry {
            version,
            outcome: Outcome::Accepted,
            source,
            at: now,
            errors: Vec::new(),
            by,
            arms: None,
        };
        self.record(entry, Some(set.files()));
    }

    /// Logs and records a rejected attempt of a set of `files` files.
    fn reject(&self, version: Version, source: Source, files: usize, errors: Vec<Diagnostic>) {
        let current = self.handle.current();
        tracing::warn!(
            %version,
            %source,
            files,
            errors = errors.len(),
            "rule set rejected; version {} stays in force",
            current.version()
        );
        for e in &errors {
            tracing::warn!("  {e}");
        }
        let entry = HistoryEntry {
            version,
            outcome: Outcome::Rejected,
            source,
            at: SystemTime::now(),
            errors,
            by: None,
            arms: None,
        };
        self.record(entry, None);
    }

    /// Records a valid set that could not be written (so it was not swapped in).
    fn record_write_failure(&self, version: Version, source: Source, files: usize, e: &io::Error) {
        let dir = self.dir.display().to_string();
        let message = format!("cannot write the rule set into {dir}: {e}");
        self.reject(
            version,
            source,
            files,
            vec![Diagnostic::error(dir, None, message)],
        );
    }

    /// Records a push that could not be written, and says whose fault it was: a name the
    /// directory cannot hold is the pusher's ([`PushError::BadName`]), anything else the
    /// server's ([`PushError::Write`]).
    fn write_error(
        &self,
        version: &Version,
        source: Source,
        files: usize,
        e: WriteError,
    ) -> PushError {
        match e {
            WriteError::Name { ref file, .. } => {
                let reason = e.to_string();
                let diag = Diagnostic::error(shown(file), None, reason.clone());
                self.reject(*version, source, files, vec![diag]);
                PushError::BadName(reason)
            }
            WriteError::Io(io) => {
                self.record_write_failure(*version, source, files, &io);
                PushError::Write {
                    dir: self.dir.clone(),
                    source: io,
                }
            }
        }
    }

    /// Records `entry` (an accepted one with its set's `files`) and tells the listener.
    fn record(&self, entry: HistoryEntry, files: Option<&[SourceFile]>) {
        lock(&self.history).record(entry.clone(), files);
        if let Some(listener) = &self.on_reload {
            listener(&entry);
        }
    }
}

/// A push refused before compiling: a bad name, or no file at all.
struct Refused {
    version: Version,
    /// The offending name (shortened when long), or `(files)` for an empty push.
    file: String,
    error: PushError,
}

/// The pushed files as sources, each named by its pushed name.
fn to_sources(files: BTreeMap<String, String>) -> Result<Vec<SourceFile>, Refused> {
    let sources: Vec<SourceFile> = files
        .into_iter()
        .map(|(name, text)| SourceFile::new(name.clone(), name, text))
        .collect();
    let refusal = if sources.is_empty() {
        Some(("(files)".to_string(), PushError::Empty))
    } else {
        sources.iter().find_map(|f| {
            check_name(&f.name)
                .err()
                .map(|reason| (shown(&f.name), PushError::BadName(reason)))
        })
    };
    match refusal {
        Some((file, error)) => Err(Refused {
            version: version_of(&sources),
            file,
            error,
        }),
        None => Ok(sources),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
