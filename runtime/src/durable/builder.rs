//! [`DurableBuilder`]: every setting of a [`Durable`] given before its seams exist (the
//! journal's options, the shared store and its claimer, how offsets name their sources), so
//! nothing arrives after a topology may already run on them.

use std::sync::Arc;

use std::sync::{Mutex, OnceLock};

use super::claimer::{Claimer, Inboxes, SharedOptions};
use super::{Durable, DurableOptions, Journal, Shared};
use crate::store::{ClaimQueue, Offset, OffsetOf, Store};
use crate::time::{TimeMap, TimeSource};
use crate::topology::Message;

/// Builds a [`Durable`]: [`Durable::builder`], the settings, then [`DurableBuilder::build`].
///
/// ```no_run
/// # fn demo() -> Result<(), rebound_runtime::store::StoreError> {
/// use rebound_runtime::durable::{Durable, DurableOptions};
/// use rebound_runtime::store::SqliteStore;
/// use rebound_runtime::time::TokioTime;
/// use std::sync::Arc;
///
/// let store = Arc::new(SqliteStore::open("rebound-data")?);
/// let durable = Durable::builder(store, Arc::new(TokioTime::new()))
///     .options(DurableOptions::default())
///     .build();
/// # let _ = durable; Ok(()) }
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct DurableBuilder {
    pub(super) store: Arc<dyn Store>,
    pub(super) time: Arc<dyn TimeSource>,
    pub(super) options: DurableOptions,
    pub(super) claims: Option<(Arc<dyn ClaimQueue>, SharedOptions)>,
    pub(super) offsets: Option<OffsetOf>,
}

impl std::fmt::Debug for DurableBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableBuilder")
            .field("options", &self.options)
            .field("shared", &self.claims.is_some())
            .field("offsets", &self.offsets.is_some())
            .finish_non_exhaustive()
    }
}

impl DurableBuilder {
    pub(super) fn new(store: Arc<dyn Store>, time: Arc<dyn TimeSource>) -> DurableBuilder {
        DurableBuilder {
            store,
            time,
            options: DurableOptions::default(),
            claims: None,
            offsets: None,
        }
    }

    /// How the durable seams behave (the default: [`DurableOptions::default`]).
    pub fn options(mut self, options: DurableOptions) -> DurableBuilder {
        self.options = options;
        self
    }

    /// On a shared store: several nodes share its retries, which this node's claimer claims
    /// when due (`claims`: the same store's claims). See [`Durable::shared`].
    pub fn shared(mut self, claims: Arc<dyn ClaimQueue>, shared: SharedOptions) -> DurableBuilder {
        self.claims = Some((claims, shared));
        self
    }

    /// Names the source of each message's offset, for a topology whose spout reads several
    /// positioned sources (partitions): `f` gives a message's [`Offset`]. Without it, offsets
    /// belong to the one source [`Durable::source_position`] loaded.
    pub fn offsets(
        mut self,
        f: impl Fn(&Message) -> Option<Offset> + Send + Sync + 'static,
    ) -> DurableBuilder {
        self.offsets = Some(Box::new(f));
        self
    }

    /// The durable seams: starts the journal thread (and, on a shared store, the claimer).
    pub fn build(self) -> Durable {
        let DurableBuilder {
            store,
            time,
            mut options,
            claims,
            offsets,
        } = self;
        // On a shared store the journal's hold is the queues' (see `Durable::shared`).
        let local_hold = match claims {
            Some(_) => std::mem::take(&mut options.journal.hold),
            None => std::time::Duration::ZERO,
        };
        let ordered_letters = options.ordered_letters;
        let journal = Journal::spawn(store.clone(), options.journal);
        let map = TimeMap::new(time.as_ref());
        let inboxes: Inboxes = Arc::default();
        let claimer = claims.map(|(claims, shared)| {
            Claimer::spawn(
                claims,
                journal.clone(),
                time.clone(),
                inboxes.clone(),
                shared,
            )
        });
        Durable {
            shared: Arc::new(Shared {
                store,
                journal,
                time,
                map,
                source: OnceLock::new(),
                offsets,
                restored: Mutex::new(Vec::new()),
                letters: Mutex::new(Vec::new()),
                ordered_letters,
                inboxes,
                claimer,
                local_hold,
                observers: Arc::default(),
            }),
        }
    }
}
