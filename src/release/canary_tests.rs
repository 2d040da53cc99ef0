//! The canary's desk over a runtime side whose figures the test sets: started, judged on each
//! tick, ended by its guard, by time, or by an operator, with the ending in the history.

use super::*;
use crate::release::{ReleaseSide, ShadowView};
use rebound_engine::reload::{Outcome, ReloadOptions, Source};

/// The runtime's canary as a test drives it: the figures are what the test says.
#[derive(Debug, Default)]
struct Side {
    canary: Mutex<Option<Arms>>,
}

impl Side {
    fn feed(&self, stable: (u64, u64, u64), canary: (u64, u64, u64)) {
        let arm = |(f, r, d): (u64, u64, u64)| ArmFigures {
            first_deliveries: f,
            retries: r,
            dead_letters: d,
            acked_by_attempt: vec![f.saturating_sub(d)],
        };
        let mut live = self.canary.lock().unwrap();
        assert!(live.is_some(), "the desk installed a canary");
        *live = Some(Arms {
            stable: arm(stable),
            canary: arm(canary),
        });
    }
}

impl ReleaseSide for Side {
    fn set_shadow(&self, _: Arc<CompiledSet>) {}
    fn clear_shadow(&self) -> bool {
        false
    }
    fn shadow(&self) -> Option<ShadowView> {
        None
    }
    fn set_canary(&self, _: Arc<CompiledSet>, _: Slice) {
        *self.canary.lock().unwrap() = Some(Arms::default());
    }
    fn clear_canary(&self) -> Option<Arms> {
        self.canary.lock().unwrap().take()
    }
    fn canary(&self) -> Option<Arms> {
        self.canary.lock().unwrap().clone()
    }
}

const STABLE: &str = "version: 1\nrules:\n  - id: r\n    match: { code: X }\n    retry: { max_retries: 3, backoff: { fixed: 1s } }\n";
const CANDIDATE: &str = "version: 1\nrules:\n  - id: r\n    match: { code: X }\n    retry: { max_retries: 3, backoff: { fixed: 2s } }\n";

fn desk() -> (tempfile::TempDir, Arc<Side>, Arc<Reloader>, CanaryDesk) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), STABLE).unwrap();
    let reloader = Arc::new(Reloader::open(dir.path(), ReloadOptions::default()).unwrap());
    let side = Arc::new(Side::default());
    let desk = CanaryDesk::new(side.clone(), reloader.clone());
    (dir, side, reloader, desk)
}

fn request(min_samples: u64, promote_after: Duration) -> CanaryRequest {
    CanaryRequest {
        files: BTreeMap::from([("a.yaml".to_string(), CANDIDATE.to_string())]),
        slice: Slice::new(50.0, vec![]),
        guard: Guard::parse(None, None, Some(min_samples)).unwrap(),
        promote_after,
    }
}

#[test]
fn a_canary_that_breaks_its_guard_is_rolled_back_and_recorded() {
    let (_dir, side, reloader, desk) = desk();
    let stable = *reloader.handle().current().version();
    let view = desk.start(request(20, Duration::from_secs(3600))).unwrap();
    assert_eq!(desk.tick(), Some(CanaryState::Running));
    side.feed((100, 10, 1), (100, 10, 100));
    assert_eq!(desk.tick(), Some(CanaryState::RolledBack));
    assert_eq!(reloader.handle().current().version(), &stable);
    let ended = desk.view().unwrap();
    assert_eq!(
        ended.arms.canary.dead_letters, 100,
        "the final figures are kept"
    );
    assert!(
        ended
            .reason
            .as_deref()
            .unwrap()
            .starts_with("dead-letter ratio 1.000 > 1.1")
    );
    let entry = &reloader.history()[0];
    assert_eq!(
        (entry.version, entry.source, entry.outcome),
        (view.version, Source::RolledBack, Outcome::Rejected)
    );
    assert_eq!(entry.by.as_ref().unwrap().operator, CONTROLLER);
    assert_eq!(entry.arms.as_ref(), Some(&ended.arms));
    assert!(side.canary().is_none(), "the runtime's canary is cleared");
    assert_eq!(desk.tick(), None, "an ended canary is not judged again");
}

#[test]
fn a_canary_within_its_guard_is_promoted_after_promote_after() {
    let (_dir, side, reloader, desk) = desk();
    let view = desk.start(request(20, Duration::ZERO)).unwrap();
    side.feed((100, 10, 1), (100, 10, 1));
    assert_eq!(desk.tick(), Some(CanaryState::Promoted));
    let status = reloader.status();
    assert_eq!(
        (status.set.version(), status.source),
        (&view.version, Source::Canary)
    );
    assert_eq!(reloader.history()[0].source, Source::Canary);
    assert!(side.canary().is_none());
    assert!(!desk.is_running());
    assert_eq!(desk.totals().canary.first_deliveries, 100);
}

#[test]
fn a_canary_without_samples_is_held_then_judged_when_they_come() {
    let (_dir, side, reloader, desk) = desk();
    let stable = *reloader.handle().current().version();
    desk.start(request(500, Duration::ZERO)).unwrap();
    side.feed((1000, 10, 1), (12, 0, 0));
    assert_eq!(desk.tick(), Some(CanaryState::Held));
    assert_eq!(
        reloader.handle().current().version(),
        &stable,
        "never promoted on no data"
    );
    assert!(desk.view().unwrap().reason.unwrap().contains("canary 12"));
    side.feed((1000, 10, 1), (500, 5, 0));
    assert_eq!(desk.tick(), Some(CanaryState::Promoted));
}

#[test]
fn one_canary_at_a_time_and_an_abort_is_recorded_with_its_operator() {
    let (_dir, side, reloader, desk) = desk();
    desk.start(request(20, Duration::from_secs(3600))).unwrap();
    assert!(matches!(
        desk.start(request(20, Duration::ZERO)),
        Err(StartError::Running(_))
    ));
    side.feed((10, 1, 0), (10, 2, 0));
    let by = Actor {
        operator: "ana".into(),
        reason: "wrong slice".into(),
    };
    let ended = desk.abort(by).unwrap();
    assert_eq!(ended.state, CanaryState::RolledBack);
    assert_eq!(ended.arms.canary.retries, 2);
    let entry = &reloader.history()[0];
    assert_eq!(entry.source, Source::RolledBack);
    assert_eq!(entry.by.as_ref().unwrap().operator, "ana");
    assert!(desk.abort(actor("again")).is_none());
    // Once it ended, another may start; the counters go on from the last one's.
    desk.start(request(20, Duration::from_secs(3600))).unwrap();
    side.feed((5, 0, 0), (5, 0, 0));
    assert_eq!(desk.totals().canary.first_deliveries, 15);
}

#[test]
fn an_invalid_candidate_does_not_start() {
    let (_dir, side, _reloader, desk) = desk();
    let mut bad = request(20, Duration::ZERO);
    bad.files
        .insert("b.yaml".into(), "version: 1\nrules: [".into());
    assert!(matches!(desk.start(bad), Err(StartError::Refused(_))));
    assert!(side.canary().is_none());
    assert_eq!(desk.state(), None);
}
