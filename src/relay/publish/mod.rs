//! Dead letters to the broker (`sources.md`, "Dead letters to the broker";
//! `dead_letters: {publish: URL}`): each dead letter, once stored, is also published to a
//! Redis stream, a JetStream subject or a RabbitMQ exchange, retried until the broker accepts it, counted, and
//! never lost because the broker is down.
//!
//! - [`Publisher`]: what the job holds. Its [`Publisher::letters`] is the durable layer's
//!   dead-letter observer (called after the journal's commit, so only stored letters are
//!   published); [`Publisher::start`] spawns the one task that sends them; [`Publisher::stop`]
//!   gives that task a bounded time to send what is queued.
//! - `worker.rs`: that task (the queue, the retries, the catch-up from the store).
//! - `mark.rs`: the mark, the last letter accepted, in the data directory's
//!   `dead-letters-published`: what a start catches up from.
//! - `fields.rs`: what a published letter carries; `redis.rs`, `nats.rs`, `amqp.rs`: the
//!   brokers.
//!
//! At-least-once: a letter may be published twice (after a crash, or an ack that was lost),
//! never zero times.

mod amqp;
mod fields;
#[cfg(feature = "kafka")]
mod kafka;
mod mark;
mod nats;
mod redis;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rebound_runtime::store::{DeadLetter, Store};
use tokio::sync::{mpsc, watch};

pub use self::fields::{PAYLOAD, letter_headers};
pub use self::mark::FILE as MARK_FILE;
pub use self::worker::MAX_QUEUED;
pub use crate::config::{PublishUrl, PublishUrlError};
use crate::metrics::publish::PublishStats;

/// How long a relay's stop waits for the letters still queued.
pub const STOP_WITHIN: Duration = Duration::from_secs(2);

/// Publishes each stored dead letter to a [`PublishUrl`]. Cheap to clone: the clones are one
/// publisher.
#[derive(Clone)]
pub struct Publisher {
    shared: Arc<Shared>,
}

struct Shared {
    url: PublishUrl,
    dir: PathBuf,
    stats: Arc<PublishStats>,
    letters: mpsc::UnboundedSender<DeadLetter>,
    /// The receiving end, until the task takes it.
    inbox: Mutex<Option<mpsc::UnboundedReceiver<DeadLetter>>>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("url", &self.shared.url)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher to `url` keeping its mark in the data directory `data_dir`. Letters given
    /// to [`Publisher::letters`] before [`Publisher::start`] wait for it.
    pub fn new(url: PublishUrl, data_dir: impl Into<PathBuf>) -> Publisher {
        let (letters, inbox) = mpsc::unbounded_channel();
        let (stop, _) = watch::channel(false);
        Publisher {
            shared: Arc::new(Shared {
                url,
                dir: data_dir.into(),
                stats: Arc::default(),
                letters,
                inbox: Mutex::new(Some(inbox)),
                stop,
                task: Mutex::new(None),
            }),
        }
    }

    /// Where it publishes.
    pub fn url(&self) -> &PublishUrl {
        &self.shared.url
    }

    /// The data directory its mark is kept in.
    pub fn data_dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Its counts (`rebound_dead_letters_published_total{result}`).
    pub fn stats(&self) -> Arc<PublishStats> {
        self.shared.stats.clone()
    }

    /// Queues `letters`, just stored, to be published: give this to
    /// `Durable::on_dead_letters` (alone or from an observer of one's own). Never blocks.
    pub fn letters(&self, letters: &[DeadLetter]) {
        for letter in letters {
            // Closed only once the task has ended at the stop: the mark keeps the rest.
            let _ = self.shared.letters.send(letter.clone());
        }
    }

    /// Starts the task on the current tokio runtime: a catch-up from the mark over `store`'s
    /// letters, then every letter queued. Only the first call starts one.
    pub fn start(&self, store: Arc<dyn Store>) {
        let Some(inbox) = lock(&self.shared.inbox).take() else {
            return;
        };
        let shared = self.shared.clone();
        let task = tokio::spawn(async move {
            let shown = shared.url.to_string();
            let sink = match worker::Sink::open(&shared.url).await {
                Ok(sink) => sink,
                Err(e) => {
                    tracing::error!(to = %shown, error = %e, "cannot publish dead letters: they stay in the store");
                    return;
                }
            };
            tracing::info!(to = %shown, "publishing dead letters");
            worker::Worker::new(
                sink,
                store,
                mark::MarkFile::in_dir(&shared.dir),
                shared.stats.clone(),
                inbox,
                shared.stop.subscribe(),
                shown,
            )
            .run()
            .await;
        });
        *lock(&self.shared.task) = Some(task);
    }

    /// Lets the task send what is queued for up to `within`, then ends it; what it could not
    /// send is published by the next start's catch-up.
    pub async fn stop(&self, within: Duration) {
        self.shared.stop.send_replace(true);
        let Some(mut task) = lock(&self.shared.task).take() else {
            return;
        };
        if tokio::time::timeout(within, &mut task).await.is_err() {
            task.abort();
            tracing::warn!(to = %self.shared.url, "dead letters not published by the stop are published at the next start");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
