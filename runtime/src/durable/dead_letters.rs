//! [`DurableDeadLetters`]: the dead-letter sink that writes to the store.

use std::sync::Arc;

use std::sync::{PoisonError, RwLock};

use super::{DeadLetterObserver, HeldClaims, Journal};
use crate::fate::{BoxFuture, DeadLetter, DeadLetterSink, SinkError};
use crate::store::{Applied, Fate, WriteOp};

/// Stores dead letters as [`WriteOp::DeadLetter`]s (the letter and the message's fate, and its
/// retry row dropped, in one transaction) and returns only after the commit, so the runtime
/// tells the spout `dead_lettered(id)` only once the letter is durable.
///
/// A letter for a message whose fate is already known is refused by the store (first fate
/// wins); that is logged and counts as stored, since the message is final either way.
#[derive(Clone)]
pub struct DurableDeadLetters {
    journal: Journal,
    /// On a shared store: the node's claims, settled by a letter's commit.
    held: Option<Arc<HeldClaims>>,
    /// Told of the letters stored.
    observers: Arc<Observers>,
}

/// Who is told of the dead letters once they are stored ([`Durable::on_dead_letters`]), in
/// the order they were added.
///
/// [`Durable::on_dead_letters`]: super::Durable::on_dead_letters
#[derive(Default)]
pub(crate) struct Observers(RwLock<Vec<DeadLetterObserver>>);

impl Observers {
    /// Adds `f`, told after those added before it.
    pub(crate) fn add(&self, f: DeadLetterObserver) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(f);
    }

    /// True if nobody listens.
    pub(crate) fn is_empty(&self) -> bool {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Tells every observer of `letters`.
    pub(crate) fn tell(&self, letters: &[DeadLetter]) {
        for f in self.0.read().unwrap_or_else(PoisonError::into_inner).iter() {
            f(letters);
        }
    }
}

impl std::fmt::Debug for DurableDeadLetters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableDeadLetters")
            .field("journal", &self.journal)
            .finish_non_exhaustive()
    }
}

impl DurableDeadLetters {
    pub(crate) fn new(
        journal: Journal,
        held: Option<Arc<HeldClaims>>,
        observers: Arc<Observers>,
    ) -> DurableDeadLetters {
        DurableDeadLetters {
            journal,
            held,
            observers,
        }
    }
}

impl DeadLetterSink for DurableDeadLetters {
    fn store<'a>(&'a self, batch: &'a [DeadLetter]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let ops = batch
                .iter()
                .map(|d| WriteOp::DeadLetter(Box::new(d.clone())))
                .collect();
            let applied = self
                .journal
                .commit(ops)
                .await
                .map_err(|e| SinkError(e.to_string()))?;
            let mut stored = Vec::new();
            for (letter, applied) in batch.iter().zip(applied) {
                if let Some(held) = &self.held {
                    held.settle(letter.id());
                }
                if applied == Applied::Done {
                    stored.push(letter);
                }
                if let Applied::FateAlreadyKnown(fate) = applied {
                    let fate = match fate {
                        Fate::Acked => "acked",
                        Fate::DeadLettered => "dead-lettered",
                    };
                    tracing::warn!(id = %letter.id(), fate, "dead letter not stored: the message already has a fate");
                }
            }
            if !self.observers.is_empty() {
                if stored.len() == batch.len() {
                    self.observers.tell(batch);
                } else {
                    let stored: Vec<DeadLetter> = stored.into_iter().cloned().collect();
                    self.observers.tell(&stored);
                }
            }
            Ok(())
        })
    }
}
