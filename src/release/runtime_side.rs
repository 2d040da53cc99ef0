//! The runtime's [`Release`] as the product's [`ReleaseSide`].

use super::ReleaseSide;
use rebound_engine::CompiledSet;
use rebound_engine::release::{Arms, ShadowReport, Slice};
use rebound_runtime::release::{CanaryFigures, Release};
use std::sync::Arc;

impl ReleaseSide for Release {
    fn set_shadow(&self, set: Arc<CompiledSet>) {
        Release::set_shadow(self, set);
    }

    fn clear_shadow(&self) -> bool {
        Release::clear_shadow(self)
    }

    fn shadow(&self) -> Option<ShadowReport> {
        Release::shadow(self)
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
    Arms {
        stable: figures.stable,
        canary: figures.canary,
    }
}
