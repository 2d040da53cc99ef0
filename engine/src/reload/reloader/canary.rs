//! How a canary ends in the reload pipeline (`docs/spec/release.md`, "Canary"): promoted, its
//! files become the current set as a push would make them (validated, written, swapped in,
//! published to a fleet's record), recorded with source [`Source::Canary`]; rolled back, it is
//! only recorded (source [`Source::RolledBack`], result rejected, with the arms' figures) and
//! the set in force stays.

use super::{Reloader, lock, to_sources};
use crate::handle::Source;
use crate::release::Arms;
use crate::reload::history::{Actor, HistoryEntry, Outcome};
use crate::reload::outcomes::{IfMatch, PushError, Pushed};
use crate::set::CompiledSet;
use crate::types::Version;
use std::collections::BTreeMap;
use std::time::SystemTime;

impl Reloader {
    /// Validates and compiles `files` as a push would (names, the set, the options' check),
    /// without writing, swapping or recording anything: a candidate for a shadow or a canary.
    pub fn compile_candidate(
        &self,
        files: BTreeMap<String, String>,
    ) -> Result<CompiledSet, PushError> {
        let sources = to_sources(files).map_err(|r| r.error)?;
        self.compile(sources).map_err(PushError::Rejected)
    }

    /// Makes a canary's `files` the current set, as a push would (source [`Source::Canary`]),
    /// only if the set in force is still `stable`, the one the canary ran against: a set
    /// swapped in meanwhile (a file edit, a pull) is a [`PushError::Conflict`], and the canary
    /// is not promoted over it. The history entry keeps `by` and the arms' figures.
    pub fn promote_canary(
        &self,
        files: BTreeMap<String, String>,
        stable: &Version,
        by: Actor,
        arms: Arms,
    ) -> Result<Pushed, PushError> {
        let expected = IfMatch::OneOf(vec![stable.to_string()]);
        let pushed = self.push_as(files, Some(&expected), Source::Canary, Some(by))?;
        // `push_as` recorded the entry; give it the figures the promotion was decided on.
        let mut history = lock(&self.history);
        history.amend_newest(|e| {
            if e.version == pushed.version && e.source == Source::Canary {
                e.arms = Some(arms);
            }
        });
        Ok(pushed)
    }

    /// Records that the canary of `version` was rolled back (by its guard, or an operator's
    /// abort): source [`Source::RolledBack`], result rejected, who and why in `by`, the arms'
    /// figures. The set in force does not change.
    pub fn record_rolled_back(&self, version: Version, by: Actor, arms: Arms) {
        tracing::warn!(
            %version,
            operator = %by.operator,
            "canary rolled back: {}; version {} stays in force",
            by.reason,
            self.handle.current().version()
        );
        self.record(
            HistoryEntry {
                version,
                outcome: Outcome::Rejected,
                source: Source::RolledBack,
                at: SystemTime::now(),
                errors: Vec::new(),
                by: Some(by),
                arms: Some(arms),
            },
            None,
        );
    }
}
