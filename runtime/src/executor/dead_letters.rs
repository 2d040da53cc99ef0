//! [`DeadLetterBatcher`]: a spout task's dead letters on their way to the sink, in batches.

use std::sync::Arc;
use std::time::Duration;

use rebound_engine::backoff::Doubling;
use tokio::sync::mpsc;

use crate::fate::{DeadLetter, DeadLetterSink, Label};
use crate::topology::{Key, MessageId};

/// Batches one spout task's dead letters for its [`DeadLetterSink`] (the sink writes them),
/// retries a batch the sink failed until it is stored, then reports the ids back so the spout
/// can be told `dead_lettered`.
pub(crate) struct DeadLetterBatcher {
    sink: Arc<dyn DeadLetterSink>,
    rx: mpsc::Receiver<DeadLetter>,
    done: mpsc::Sender<Vec<Stored>>,
}

/// A stored dead letter, as the batcher reports it: the message, its label, and its key with
/// its biz.
pub(super) type Stored = (MessageId, Label, Option<(Key, Arc<str>)>);

impl DeadLetterBatcher {
    /// A batcher for `sink`, with the way in (letters to store) and the way back (what was
    /// stored), each holding `cap` batches.
    pub(super) fn new(
        sink: Arc<dyn DeadLetterSink>,
        cap: usize,
    ) -> (
        DeadLetterBatcher,
        mpsc::Sender<DeadLetter>,
        mpsc::Receiver<Vec<Stored>>,
    ) {
        let (tx, rx) = mpsc::channel(cap);
        let (done, done_rx) = mpsc::channel(cap);
        (DeadLetterBatcher { sink, rx, done }, tx, done_rx)
    }

    pub(crate) async fn run(mut self) {
        while let Some(first) = self.rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < 256 {
                let Ok(dl) = self.rx.try_recv() else { break };
                batch.push(dl);
            }
            let backoff = Doubling::new(Duration::from_millis(10), Duration::from_secs(5));
            let mut failures = 0;
            loop {
                match self.sink.store(&batch).await {
                    Ok(()) => break,
                    Err(e) => {
                        if self.done.is_closed() {
                            return; // the spout task stopped; the source will redeliver
                        }
                        tracing::warn!(error = %e, letters = batch.len(), "storing dead letters failed; retrying");
                        failures += 1;
                        tokio::time::sleep(backoff.after(failures)).await;
                    }
                }
            }
            let ids = batch
                .into_iter()
                .map(|d| {
                    // A refused message (never delivered) holds no line of its key.
                    let key = d
                        .message
                        .key
                        .filter(|_| d.message.retry.attempt > 0)
                        .map(|k| (k, d.message.biz));
                    (d.message.id, d.label, key)
                })
                .collect();
            if self.done.send(ids).await.is_err() {
                return;
            }
        }
    }
}
