//! [`DurableDeadLetters`]: the dead-letter sink that writes to the store.

use super::convert::dead_letter;
use super::{Journal, RetryRows};
use crate::fate::{BoxFuture, DeadLetter, DeadLetterSink, SinkError};
use crate::store::{Applied, Fate, WriteOp};

/// Stores dead letters as [`WriteOp::DeadLetter`]s (the letter and the message's fate, and its
/// retry row dropped, in one transaction) and returns only after the commit, so the runtime
/// tells the spout `dead_lettered(id)` only once the letter is durable.
///
/// A letter for a message whose fate is already known is refused by the store (first fate
/// wins); that is logged and counts as stored, since the message is final either way.
#[derive(Clone, Debug)]
pub struct DurableDeadLetters {
    journal: Journal,
    rows: RetryRows,
}

impl DurableDeadLetters {
    pub(crate) fn new(journal: Journal, rows: RetryRows) -> DurableDeadLetters {
        DurableDeadLetters { journal, rows }
    }
}

impl DeadLetterSink for DurableDeadLetters {
    fn store<'a>(&'a self, batch: &'a [DeadLetter]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            // Forgotten before the write: once the letter is committed an operator may replay
            // it at once, and the replay's own row must not be forgotten after it. (If the
            // write fails, the message is not acked in between: the sink tries again.)
            for letter in batch {
                self.rows.remove(&letter.id);
            }
            let ops = batch
                .iter()
                .map(|d| WriteOp::DeadLetter(dead_letter(d)))
                .collect();
            let applied = self
                .journal
                .write(ops)
                .await
                .map_err(|e| SinkError(e.to_string()))?;
            for (letter, applied) in batch.iter().zip(applied) {
                if let Applied::FateAlreadyKnown(fate) = applied {
                    let fate = match fate {
                        Fate::Acked => "acked",
                        Fate::DeadLettered => "dead-lettered",
                    };
                    tracing::warn!(id = %letter.id, fate, "dead letter not stored: the message already has a fate");
                }
            }
            Ok(())
        })
    }
}
