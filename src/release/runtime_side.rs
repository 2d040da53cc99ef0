//! The runtime's [`Release`] as the product's [`ReleaseSide`]: its figures in the engine's
//! types ([`Arms`], [`ShadowView`]).

use super::{ReleaseSide, ShadowRowView, ShadowView};
use rebound_engine::CompiledSet;
use rebound_engine::release::{ArmFigures, Arms, Slice};
use rebound_runtime::release::{CanaryFigures, Release};
use std::sync::Arc;

impl ReleaseSide for Release {
    fn set_shadow(&self, set: Arc<CompiledSet>) {
        Release::set_shadow(self, set);
    }

    fn clear_shadow(&self) -> bool {
        Release::clear_shadow(self)
    }

    fn shadow(&self) -> Option<ShadowView> {
        let report = Release::shadow(self)?;
        Some(ShadowView {
            version: report.version,
            since: report.since,
            decisions: report.decisions,
            changed: report.changed,
            by: report
                .by
                .into_iter()
                .map(|r| ShadowRowView {
                    old: r.old,
                    new: r.new,
                    count: r.count,
                })
                .collect(),
        })
    }

    fn set_canary(&self, set: Arc<CompiledSet>, slice: Slice) {
        Release::set_canary(self, set, slice);
    }

    fn clear_canary(&self) -> Option<Arms> {
        Release::clear_canary(self).map(arms)
    }

    fn canary(&self) -> Option<Arms> {
        Release::canary(self).map(arms)
    }
}

fn arms(figures: CanaryFigures) -> Arms {
    let arm = |a: rebound_runtime::release::ArmFigures| ArmFigures {
        first_deliveries: a.first_deliveries,
        retries: a.retries,
        dead_letters: a.dead_letters,
        acked_by_attempt: a.acked_by_attempt,
    };
    Arms {
        stable: arm(figures.stable),
        canary: arm(figures.canary),
    }
}
