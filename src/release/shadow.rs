//! The shadow set (`docs/spec/release.md`, "Shadow"): installed, replaced and removed through
//! the admin API, decided with by the runtime beside the current set, never acted on.
//!
//! The runtime counts a shadow's decisions from zero each time one is installed; the
//! process's `rebound_shadow_decisions_total{changed}` is a counter, so the desk keeps what
//! earlier shadows counted (read just before they are replaced or removed) and adds the live
//! shadow's counts to it. Decisions made between that last read and the removal are not
//! counted: a few at most, never a counter that goes back.

use super::ReleaseSide;
use rebound_engine::release::Verdict;
use rebound_engine::{CompiledSet, Version};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// A shadow's report: how many decisions it made beside the current set, how many differed,
/// and by how.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowView {
    /// The shadow set's version.
    pub version: Version,
    /// When it was installed.
    pub since: SystemTime,
    /// Decisions made by both sets since.
    pub decisions: u64,
    /// Those whose rule, action or label differed.
    pub changed: u64,
    /// The changed ones by (old, new) verdict.
    pub by: Vec<ShadowRowView>,
}

/// One row of a shadow's report: decisions the current set made as `old` and the shadow as
/// `new`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowRowView {
    /// The current set's verdict.
    pub old: Verdict,
    /// The shadow's.
    pub new: Verdict,
    /// How many decisions.
    pub count: u64,
}

/// The shadow of one process.
#[derive(Debug)]
pub struct ShadowDesk {
    side: Arc<dyn ReleaseSide>,
    /// (decisions, changed) counted by shadows already removed or replaced.
    retired: Mutex<(u64, u64)>,
}

impl ShadowDesk {
    /// The desk over the runtime's release.
    pub fn new(side: Arc<dyn ReleaseSide>) -> ShadowDesk {
        ShadowDesk {
            side,
            retired: Mutex::new((0, 0)),
        }
    }

    /// Installs `set` as the shadow, replacing any.
    pub fn install(&self, set: Arc<CompiledSet>) {
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        retire(&mut retired, self.side.shadow());
        self.side.set_shadow(set);
    }

    /// Removes the shadow; false when none was installed.
    pub fn remove(&self) -> bool {
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        retire(&mut retired, self.side.shadow());
        self.side.clear_shadow()
    }

    /// The installed shadow's report.
    pub fn report(&self) -> Option<ShadowView> {
        self.side.shadow()
    }

    /// `(unchanged, changed)` decisions of every shadow of the process so far.
    pub fn totals(&self) -> (u64, u64) {
        let retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut decisions, mut changed) = *retired;
        if let Some(live) = self.side.shadow() {
            decisions += live.decisions;
            changed += live.changed;
        }
        (decisions.saturating_sub(changed), changed)
    }
}

fn retire(retired: &mut (u64, u64), last: Option<ShadowView>) {
    if let Some(last) = last {
        retired.0 += last.decisions;
        retired.1 += last.changed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebound_engine::release::{Arms, Slice};

    /// The runtime's shadow as a test drives it: its counts are what the test says, from zero
    /// at each install.
    #[derive(Debug, Default)]
    struct Side {
        live: Mutex<Option<(u64, u64)>>,
    }

    impl ReleaseSide for Side {
        fn set_shadow(&self, _: Arc<CompiledSet>) {
            *self.live.lock().unwrap() = Some((0, 0));
        }
        fn clear_shadow(&self) -> bool {
            self.live.lock().unwrap().take().is_some()
        }
        fn shadow(&self) -> Option<ShadowView> {
            let (decisions, changed) = (*self.live.lock().unwrap())?;
            Some(ShadowView {
                version: Version::from_hash(1),
                since: SystemTime::UNIX_EPOCH,
                decisions,
                changed,
                by: Vec::new(),
            })
        }
        fn set_canary(&self, _: Arc<CompiledSet>, _: Slice) {}
        fn clear_canary(&self) -> Option<Arms> {
            None
        }
        fn canary(&self) -> Option<Arms> {
            None
        }
    }

    fn set() -> Arc<CompiledSet> {
        let file = rebound_engine::SourceFile::new("a.yaml", "a.yaml", "version: 1\n");
        Arc::new(rebound_engine::compile(vec![file]).unwrap())
    }

    #[test]
    fn the_totals_never_go_back_when_a_shadow_is_replaced_or_removed() {
        let side = Arc::new(Side::default());
        let desk = ShadowDesk::new(side.clone());
        assert_eq!(desk.totals(), (0, 0));
        assert!(!desk.remove(), "none installed");
        desk.install(set());
        *side.live.lock().unwrap() = Some((10, 4));
        assert_eq!(desk.totals(), (6, 4));
        desk.install(set()); // replaced: the new one counts from zero
        assert_eq!(desk.totals(), (6, 4));
        *side.live.lock().unwrap() = Some((5, 5));
        assert_eq!(desk.totals(), (6, 9));
        assert!(desk.remove());
        assert_eq!(desk.totals(), (6, 9));
        assert!(desk.report().is_none());
    }
}
