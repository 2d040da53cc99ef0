//! The publisher's task: the one owner of the queue, the connection and the mark.
//!
//! Letters come in on a channel from the durable layer's observer, after their commit. The
//! task sends them in order, each retried with [`Doubling`] waits until the broker accepts it,
//! and moves the mark with each letter accepted (`mark.rs`). While the broker refuses, new letters queue in
//! memory; past [`MAX_QUEUED`] the oldest are dropped from memory (they are in the store) and
//! the task catches up from the store instead. A catch-up, also done at every start, lists the
//! store's letters stored at or after the mark's time (all of them without one) but those it
//! names, oldest page first,
//! and sends each; a letter also still queued is not sent twice.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rebound_engine::backoff::Doubling;
use rebound_runtime::store::{
    DeadLetter, DeadLetterFilter, DeadLetterId, MAX_PAGE, Store, StoredDeadLetter,
};
use tokio::sync::{mpsc, watch};

use super::amqp::AmqpSink;
#[cfg(feature = "kafka")]
use super::kafka::KafkaSink;
use super::mark::{Mark, MarkFile};
use super::nats::NatsSink;
use super::redis::RedisSink;
use crate::config::PublishUrl;
use crate::metrics::publish::PublishStats;

/// Letters held in memory at most while the broker refuses; past it the oldest are left to
/// the catch-up from the store.
pub const MAX_QUEUED: usize = 10_000;

/// The waits between attempts of one letter.
const RETRY: Doubling = Doubling::new(Duration::from_millis(100), Duration::from_secs(5));

/// Where letters go.
pub(super) enum Sink {
    Redis(RedisSink),
    Nats(NatsSink),
    /// Boxed: lapin's connection and channel are large, and there is one sink per process.
    Amqp(Box<AmqpSink>),
    #[cfg(feature = "kafka")]
    Kafka(KafkaSink),
}

/// Why the broker did not take a letter (it is retried either way).
#[derive(Debug)]
pub(super) enum Refusal {
    /// Refused, or no answer (counted `failed`).
    Failed(String),
    /// Taken and routed nowhere: RabbitMQ returned it, no queue bound (counted `unroutable`).
    Unroutable(String),
}

impl Sink {
    /// The sink of `url` (a NATS client connects in the background).
    pub(super) async fn open(url: &PublishUrl) -> Result<Sink, String> {
        match url {
            PublishUrl::RedisStream { server, stream } => {
                RedisSink::new(server, stream).map(Sink::Redis)
            }
            PublishUrl::JetStream {
                server,
                credentials,
                subject,
            } => NatsSink::connect(server, credentials.as_ref(), subject)
                .await
                .map(Sink::Nats),
            PublishUrl::Amqp(url) => AmqpSink::new(url).map(|s| Sink::Amqp(Box::new(s))),
            #[cfg(feature = "kafka")]
            PublishUrl::Kafka { brokers, topic } => KafkaSink::new(brokers, topic).map(Sink::Kafka),
        }
    }

    async fn send(&mut self, letter: &DeadLetter) -> Result<(), Refusal> {
        match self {
            Sink::Redis(s) => s.send(letter).await.map_err(Refusal::Failed),
            Sink::Nats(s) => s.send(letter).await.map_err(Refusal::Failed),
            Sink::Amqp(s) => s.send(letter).await,
            #[cfg(feature = "kafka")]
            Sink::Kafka(s) => s.send(letter).await.map_err(Refusal::Failed),
        }
    }
}

/// The task's state.
pub(super) struct Worker {
    pub(super) sink: Sink,
    pub(super) store: Arc<dyn Store>,
    pub(super) marks: MarkFile,
    pub(super) stats: Arc<PublishStats>,
    pub(super) letters: mpsc::UnboundedReceiver<DeadLetter>,
    pub(super) stop: watch::Receiver<bool>,
    pub(super) shown: String,
    mark: Option<Mark>,
    queue: VecDeque<DeadLetter>,
    /// Letters were dropped from memory (or the store could not be listed): catch up.
    behind: bool,
    /// Letters the last catch-up sent, not to be sent again from the queue.
    caught: HashSet<(String, u64)>,
    /// Refused attempts in a row.
    refused: u32,
}

fn key(letter: &DeadLetter) -> (String, u64) {
    (letter.id().as_str().to_owned(), letter.at.as_millis())
}

impl Worker {
    /// A worker that starts with a catch-up from the mark in `marks`.
    pub(super) fn new(
        sink: Sink,
        store: Arc<dyn Store>,
        marks: MarkFile,
        stats: Arc<PublishStats>,
        letters: mpsc::UnboundedReceiver<DeadLetter>,
        stop: watch::Receiver<bool>,
        shown: String,
    ) -> Worker {
        let mark = marks.read();
        Worker {
            sink,
            store,
            marks,
            stats,
            letters,
            stop,
            shown,
            mark,
            queue: VecDeque::new(),
            behind: true,
            caught: HashSet::new(),
            refused: 0,
        }
    }

    /// Publishes until stopped with nothing left to send (or aborted).
    pub(super) async fn run(mut self) {
        loop {
            self.take_new();
            if self.behind {
                self.behind = false;
                self.catch_up().await;
                continue;
            }
            if let Some(letter) = self.queue.pop_front() {
                if !self.caught.remove(&key(&letter)) {
                    self.deliver(&letter).await;
                }
                continue;
            }
            self.caught.clear();
            if *self.stop.borrow() {
                return;
            }
            tokio::select! {
                letter = self.letters.recv() => match letter {
                    Some(letter) => self.push(letter),
                    None => return,
                },
                changed = self.stop.changed() => if changed.is_err() {
                    return;
                },
            }
        }
    }

    fn push(&mut self, letter: DeadLetter) {
        self.queue.push_back(letter);
        if self.queue.len() > MAX_QUEUED {
            self.queue.pop_front();
            if !self.behind {
                tracing::warn!(to = %self.shown, queued = MAX_QUEUED, "dead letters queued past the bound: the oldest are dropped from memory and published from the store once the broker accepts again");
            }
            self.behind = true;
        }
    }

    fn take_new(&mut self) {
        while let Ok(letter) = self.letters.try_recv() {
            self.push(letter);
        }
    }

    /// Sends `letter` until the broker accepts it, then moves the mark to it.
    async fn deliver(&mut self, letter: &DeadLetter) {
        loop {
            match self.sink.send(letter).await {
                Ok(()) => {
                    self.stats.published();
                    if self.refused > 0 {
                        tracing::info!(to = %self.shown, refused = self.refused, "the dead letters' broker accepts again");
                    }
                    self.refused = 0;
                    let mark = Mark::accepted(self.mark.take(), letter);
                    if let Err(e) = self.marks.write(&mark) {
                        tracing::warn!(error = %e, "cannot write the dead letters' publish mark: a restart publishes some again");
                    }
                    self.mark = Some(mark);
                    return;
                }
                Err(refusal) => {
                    let why = match refusal {
                        Refusal::Failed(why) => {
                            self.stats.failed();
                            why
                        }
                        Refusal::Unroutable(why) => {
                            self.stats.unroutable();
                            why
                        }
                    };
                    self.refused = self.refused.saturating_add(1);
                    if self.refused == 1 {
                        tracing::warn!(to = %self.shown, error = %why, id = %letter.id().as_str(), "the dead letters' broker refuses a letter: retrying until it accepts");
                    }
                    self.wait(RETRY.after(self.refused)).await;
                }
            }
        }
    }

    /// Sleeps `d`, taking new letters in meanwhile.
    async fn wait(&mut self, d: Duration) {
        let sleep = tokio::time::sleep(d);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return,
                letter = self.letters.recv() => match letter {
                    Some(letter) => self.push(letter),
                    None => {
                        sleep.await;
                        return;
                    }
                },
            }
        }
    }

    /// Sends every stored letter at or after the mark (but the mark's own), oldest page
    /// first. A store that cannot be listed is tried again after a wait.
    async fn catch_up(&mut self) {
        let from = self.mark.clone();
        let filter = DeadLetterFilter {
            since: from.as_ref().map(Mark::at),
            limit: MAX_PAGE,
            ..DeadLetterFilter::default()
        };
        let bounds = match self.list(filter.clone(), page_bounds).await {
            Ok(bounds) => bounds,
            Err(e) => return self.listing_failed(e).await,
        };
        let mut sent = 0u64;
        for before in bounds.into_iter().rev() {
            let page = DeadLetterFilter {
                before: Some(before),
                ..filter.clone()
            };
            let mut letters = match self.list(page, one_page).await {
                Ok(letters) => letters,
                Err(e) => return self.listing_failed(e).await,
            };
            letters.reverse();
            for stored in letters {
                let letter = stored.letter;
                if from.as_ref().is_some_and(|m| m.names(&letter)) {
                    continue;
                }
                self.deliver(&letter).await;
                self.caught.insert(key(&letter));
                sent += 1;
            }
        }
        if sent > 0 {
            tracing::info!(to = %self.shown, sent, "published the stored dead letters past the mark");
        }
    }

    async fn listing_failed(&mut self, error: String) {
        tracing::warn!(error = %error, "cannot list the stored dead letters to publish: trying again");
        self.behind = true;
        self.wait(Duration::from_secs(1)).await;
    }

    /// Runs `read` over the store on a blocking thread.
    async fn list<T: Send + 'static>(
        &self,
        filter: DeadLetterFilter,
        read: impl FnOnce(&dyn Store, &DeadLetterFilter) -> rebound_runtime::store::Result<T>
        + Send
        + 'static,
    ) -> Result<T, String> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || read(store.as_ref(), &filter))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

/// The `before` cursor of each page of `filter`'s letters, newest page first: the pages read
/// again with them hold the same letters whatever is stored meanwhile (new letters have higher
/// ids).
fn page_bounds(
    store: &dyn Store,
    filter: &DeadLetterFilter,
) -> rebound_runtime::store::Result<Vec<DeadLetterId>> {
    let first = store.dead_letters(filter)?;
    let Some(top) = first.items.first() else {
        return Ok(Vec::new());
    };
    let mut bounds = vec![DeadLetterId(top.id.0 + 1)];
    let mut next = first.next;
    while let Some(cursor) = next {
        bounds.push(cursor);
        let page = DeadLetterFilter {
            before: Some(cursor),
            ..filter.clone()
        };
        next = store.dead_letters(&page)?.next;
    }
    Ok(bounds)
}

/// One page of `filter`'s letters, newest first.
fn one_page(
    store: &dyn Store,
    filter: &DeadLetterFilter,
) -> rebound_runtime::store::Result<Vec<StoredDeadLetter>> {
    Ok(store.dead_letters(filter)?.items)
}
