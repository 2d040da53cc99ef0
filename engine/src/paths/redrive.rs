//! A path past its dead letter: when the label it ends in redrives (`labels:` in
//! `docs/spec/rules.md`), the letter is replayed `after` the dead-lettering as a first
//! delivery again (attempt 1, elapsed 0, no last delay), up to `max` times. Each replay is
//! decided by the same rule, so it retries as the path before it did; its totals go on from
//! where that one ended, the `after` wait included.

use super::{PathEnd, RetryPath, RetryRow};
use crate::labels::Labels;
use serde::Serialize;

/// One replay of a path's dead letter, and the retries it goes through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedriveLeg {
    /// Which replay this is (1 for the first).
    pub redrive: u32,
    /// The label's `max`: how many replays there are in all.
    pub of: u32,
    /// The label's `after`, in ms: the wait between the dead letter and this replay.
    pub after_ms: u64,
    /// Total delay when the replay starts (the `after` waits included), every delay at its
    /// shortest, in ms.
    pub start_best_ms: u64,
    /// The same with every delay at its longest.
    pub start_worst_ms: u64,
    /// The replay's retries, numbered from 1 again, their totals counted from the path's
    /// start.
    pub retries: Vec<RetryRow>,
    /// Where the replay ends.
    pub end: PathEnd,
}

/// Follows the redrives of the label `path` ends in, if it has any: `path.redrives` gets one
/// leg per replay, and `path.total_worst_ms` the worst-case total at the last one's end.
pub(crate) fn follow(path: &mut RetryPath, labels: &Labels) {
    let Some(redrive) = labels
        .get(&path.end.dead_letter)
        .and_then(|policy| policy.redrive)
    else {
        return;
    };
    let after = super::ms(redrive.after);
    // The totals at the end of one pass: every retry in the best case, the worst case's
    // own retries in the worst.
    let best = path.retries.last().map_or(0, |r| r.total_best_ms);
    let worst_retries = path.end.worst_case.retries as usize;
    let worst = worst_retries
        .checked_sub(1)
        .and_then(|i| path.retries.get(i))
        .map_or(0, |r| r.total_worst_ms);
    let (mut end_best, mut end_worst) = (best, worst);
    for n in 1..=redrive.max {
        let start_best = end_best.saturating_add(after);
        let start_worst = end_worst.saturating_add(after);
        let retries = path
            .retries
            .iter()
            .map(|r| RetryRow {
                total_best_ms: r.total_best_ms.saturating_add(start_best),
                total_worst_ms: r.total_worst_ms.saturating_add(start_worst),
                ..*r
            })
            .collect();
        path.redrives.push(RedriveLeg {
            redrive: n,
            of: redrive.max,
            after_ms: after,
            start_best_ms: start_best,
            start_worst_ms: start_worst,
            retries,
            end: path.end.clone(),
        });
        end_best = start_best.saturating_add(best);
        end_worst = start_worst.saturating_add(worst);
    }
    path.total_worst_ms = Some(end_worst);
}

#[cfg(test)]
mod tests {
    use crate::paths::{PathTable, retry_paths};
    use std::path::Path;

    /// The paths of the labels fixture: `payment-processing` (fixed 100ms, 3 retries) ends
    /// in L1, which redrives 3 times after 10m; `db-lock` ends in L2, which does not.
    fn fixture() -> PathTable {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/labels");
        retry_paths(&crate::load_dir(&dir).unwrap().unwrap())
    }

    #[test]
    fn a_redriving_label_replays_the_path_max_times_with_the_after_waits_in_its_totals() {
        let t = fixture();
        let p = &t.paths[0];
        assert_eq!(p.rule, "payment-processing");
        type Leg = (u32, u32, u64, Vec<(u32, u64)>);
        let legs: Vec<Leg> = p
            .redrives
            .iter()
            .map(|l| {
                let rows = l
                    .retries
                    .iter()
                    .map(|r| (r.retry, r.total_worst_ms))
                    .collect();
                (l.redrive, l.of, l.start_worst_ms, rows)
            })
            .collect();
        assert_eq!(
            legs,
            [
                (
                    1,
                    3,
                    600_300,
                    vec![(1, 600_400), (2, 600_500), (3, 600_600)]
                ),
                (
                    2,
                    3,
                    1_200_600,
                    vec![(1, 1_200_700), (2, 1_200_800), (3, 1_200_900)]
                ),
                (
                    3,
                    3,
                    1_800_900,
                    vec![(1, 1_801_000), (2, 1_801_100), (3, 1_801_200)]
                ),
            ]
        );
        assert_eq!(p.total_worst_ms, Some(1_801_200));
        // A label without redrive, and the defaults' built-in `default`: the path ends there.
        assert_eq!(t.paths[1].rule, "db-lock");
        assert!(t.paths[1].redrives.is_empty() && t.paths[1].total_worst_ms.is_none());
        assert!(t.paths.last().unwrap().redrives.is_empty());
    }

    #[test]
    fn the_table_csv_and_json_show_the_redrives() {
        let t = fixture();
        let text = t.to_string();
        assert!(
            text.contains(
                "  ends: L1 after 3 retries (max_retries)\n  redrive 1/3 after 10m: replayed as a first delivery (attempts from 1 again)\n      1  100ms                 10m400ms      10m400ms\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  ends: L1 after 3 retries (max_retries); no redrive left, the letter stays\n  worst-case total with 3 redrives: 30m1s200ms\n"),
            "{text}"
        );
        let csv = t.to_csv();
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",worst_case_end_retries,redrive")
        );
        assert!(
            csv.contains("\npayment-processing,3,100ms,100,100,1801200,1801200,true,L1,max_retries,3,max_retries,3,3\n"),
            "{csv}"
        );
        assert!(
            csv.contains("\nbad-payload,,,,,0,0,,L3,give_up,0,give_up,0,0\n"),
            "{csv}"
        );
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["paths"][0]["redrives"][2]["after_ms"], 600_000);
        assert_eq!(json["paths"][0]["total_worst_ms"], 1_801_200);
        assert!(json["paths"][1].get("redrives").is_none());
    }

    #[test]
    fn a_give_up_rule_is_redriven_too() {
        let yaml = "version: 1\nrules:\n  - id: g\n    give_up: true\n    dead_letter: L1\nlabels:\n  L1:\n    redrive: { after: 1h, max: 2 }\n";
        let set = crate::compile(vec![crate::SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
        let p = &retry_paths(&set).paths[0];
        let starts: Vec<(u64, usize)> = p
            .redrives
            .iter()
            .map(|l| (l.start_worst_ms, l.retries.len()))
            .collect();
        assert_eq!(starts, [(3_600_000, 0), (7_200_000, 0)]);
        assert_eq!(p.total_worst_ms, Some(7_200_000));
    }
}
