//! The reader: a [`BaseConsumer`] polled on a thread of its own, a member of the URL's group
//! with manual commits. Everything the broker's side needs happens on that thread, in one
//! place: librdkafka serves the rebalance callbacks inside `poll`, so the marks (`marks.rs`)
//! are shared only with the committer's thread (behind one lock, never held across a call to
//! the broker but the revocation's own commit).
//!
//! Each turn it takes the custody the spout reported, hands out what it polled (a record the
//! store already has custody of, [`Durable::known`], is taken into custody at once and not
//! handed out; one this node still holds is not handed out twice), hands the marks that moved
//! to the committer (`committer.rs`: a thread that commits synchronously, so that the broker's
//! answer moves the confirmed offsets) every [`KafkaOptions::commit_every`] or sooner once a
//! quarter of `max_unacked` waits, pauses the assigned partitions while what it holds
//! unacknowledged is at `max_unacked` (and resumes them below it), and asks the broker for the
//! lag every two
//! seconds. On revocation (`pre_rebalance`) what is in custody is committed synchronously
//! before the partitions go; on assignment the committed offsets are read, and librdkafka
//! starts there (or at `offset=` for a partition without one). At stop the marks are
//! committed synchronously and the consumer leaves the group.
//!
//! An outage is librdkafka's to ride out: it reconnects for as long as it takes, and the
//! reader shows it in [`SourceStats`] (an error from `poll`, or a failed look at the lag, until
//! the broker answers again). A consumer librdkafka calls unusable (a fatal error) is made
//! again, after a [`Doubling`] wait.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{Headers, Message as _};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rebound_engine::backoff::Doubling;
use rebound_runtime::durable::Durable;
use rebound_runtime::topology::{Message, MessageId};

use super::committer::Committer;
use super::mapping::{self, Record};
use super::marks::{Commit, Marks};
use super::{KafkaOptions, ReadThrough, SourceStats};

/// Waits between attempts to make a consumer librdkafka gave up on.
const REMAKE: Doubling = Doubling::new(Duration::from_millis(100), Duration::from_secs(5));
/// Batches of polled records the reader holds before it pauses the partitions.
const PARK_MOST: usize = 10;
/// How often the lag is asked for.
const LAG_EVERY: Duration = Duration::from_secs(2);
/// How long the committed offsets on assignment may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for the last commit (as the Redis Streams source waits for its last
/// acks): a broker that does not answer then leaves those records to be read again, and the
/// store's custody skips them.
const STOP_WAIT: Duration = Duration::from_secs(2);
/// How long a look at one partition's watermarks may take.
const LAG_TIMEOUT: Duration = Duration::from_millis(500);

/// A custody the spout reported: the partition, the offset and when.
pub(super) type Custody = (i32, i64, Instant);

/// A record polled and not yet handed out.
struct Parked {
    partition: i32,
    offset: i64,
    message: Message,
    /// The store already has its custody.
    known: bool,
}

/// What the reader and librdkafka's callbacks share (all on the reader's thread).
pub(super) struct Shared {
    pub(super) marks: Marks,
    custody: Receiver<Custody>,
    parked: VecDeque<Parked>,
    /// A rebalance happened since the loop last looked (the pause is decided again).
    rebalanced: bool,
    /// The spout is gone (its custody channel closed).
    gone: bool,
}

impl Shared {
    /// Takes in every custody the spout reported.
    fn drain(&mut self) {
        loop {
            match self.custody.try_recv() {
                Ok((partition, offset, at)) => self.marks.custody(partition, offset, at),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.gone = true;
                    return;
                }
            }
        }
    }
}

/// The consumer's context: librdkafka's callbacks, over the shared marks.
pub(super) struct Context {
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) stats: Arc<SourceStats>,
    pub(super) topic: String,
    pub(super) shown: String,
}

impl Context {
    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ClientContext for Context {}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let partitions: Vec<i32> = tpl
            .elements_for_topic(&self.topic)
            .iter()
            .map(|e| e.partition())
            .collect();
        let mut shared = self.shared();
        shared.drain();
        let marks = shared.marks.final_marks(&partitions);
        if !marks.is_empty() {
            // Synchronously: the partitions go once this returns, and their next owner starts
            // at what is committed.
            match consumer.commit(&list(&self.topic, &marks), CommitMode::Sync) {
                Ok(()) => {
                    for &(partition, offset) in &marks {
                        let took = shared.marks.confirmed(partition, offset);
                        count_confirmed(&self.stats, took);
                    }
                }
                Err(e) => {
                    tracing::warn!(source = %self.shown, error = %e, "the commit before a revocation failed; the next owner reads those records again and the store's custody skips them")
                }
            }
        }
        for &partition in &partitions {
            shared.marks.revoked(partition);
        }
        shared.parked.retain(|p| !partitions.contains(&p.partition));
        shared.rebalanced = true;
        tracing::info!(source = %self.shown, ?partitions, "partitions revoked");
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Assign(tpl) = rebalance else {
            return;
        };
        let committed = consumer.committed_offsets((*tpl).clone(), CALL_TIMEOUT);
        let mut shared = self.shared();
        let mut partitions = Vec::new();
        for e in tpl.elements_for_topic(&self.topic) {
            let partition = e.partition();
            let offset = match &committed {
                Ok(c) => match c.find_partition(&self.topic, partition).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => Some(o),
                    _ => None,
                },
                Err(_) => None,
            };
            shared.marks.assigned(partition, offset);
            partitions.push((partition, offset));
        }
        if let Err(e) = &committed {
            tracing::warn!(source = %self.shown, error = %e, "the committed offsets of the assigned partitions could not be read; the unacknowledged count starts at the first record read");
        }
        // A partition assigned now is not paused; the loop pauses it again if it must.
        let _ = consumer.resume(tpl);
        shared.rebalanced = true;
        tracing::info!(source = %self.shown, assigned = ?partitions, "partitions assigned (partition, committed offset)");
    }
}

pub(super) fn count_confirmed(stats: &SourceStats, took: Vec<Duration>) {
    stats.acked_at_broker.fetch_add(took.len() as u64, Relaxed);
    stats.observe_custody(took);
}

/// A list of `marks` of `topic`, to commit.
pub(super) fn list(topic: &str, marks: &Commit) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::with_capacity(marks.len());
    for &(partition, offset) in marks {
        // Only a negative offset is refused, and no mark is one.
        let _ = tpl.add_partition_offset(topic, partition, Offset::Offset(offset));
    }
    tpl
}

/// What the reader thread needs.
pub(super) struct Reader {
    pub options: KafkaOptions,
    pub durable: Option<Durable>,
    pub messages: SyncSender<Message>,
    pub custody: Receiver<Custody>,
    pub stop: Arc<AtomicBool>,
    pub read_through: ReadThrough,
}

/// The consumer's configuration.
fn config(options: &KafkaOptions) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", options.url.bootstrap())
        .set("group.id", &options.url.group)
        .set("client.id", format!("rebound {}", options.url.group))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", options.url.start.as_str())
        .set(
            "session.timeout.ms",
            options.session_timeout.as_millis().to_string(),
        )
        // Prefetch ten batches, not librdkafka's 100,000 messages per partition; and fetch again
        // 10 ms after the prefetch was full, not a second after (librdkafka's
        // fetch.queue.backoff.ms: with a small prefetch it idled the reader most of the time,
        // 500 records/s against the hand loop's 6,300 on the mock).
        .set(
            "queued.min.messages",
            (10 * options.batch.max(1)).to_string(),
        )
        .set("fetch.queue.backoff.ms", "10")
        .set("reconnect.backoff.ms", "100")
        .set("reconnect.backoff.max.ms", "5000");
    c
}

/// Runs until the spout is gone or asks it to stop.
pub(super) fn run(reader: Reader) {
    let Reader {
        options,
        durable,
        messages,
        custody,
        stop,
        read_through,
    } = reader;
    let shared = Arc::new(Mutex::new(Shared {
        marks: Marks::default(),
        custody,
        parked: VecDeque::new(),
        rebalanced: false,
        gone: false,
    }));
    let shown = options.url.to_string();
    let mut failures = 0u32;
    while !stop.load(Relaxed) {
        let context = Context {
            shared: shared.clone(),
            stats: options.stats.clone(),
            topic: options.url.topic.clone(),
            shown: shown.clone(),
        };
        let made: KafkaResult<BaseConsumer<Context>> =
            config(&options).create_with_context(context);
        let consumer = match made.and_then(|c| c.subscribe(&[&options.url.topic]).map(|()| c)) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                failures += 1;
                options.stats.reachable(false);
                tracing::error!(source = %shown, error = %e, failures, "the Kafka consumer could not be made; trying again");
                std::thread::sleep(REMAKE.after(failures));
                continue;
            }
        };
        let committer = Committer::start(consumer.clone());
        let ended = Turns {
            options: &options,
            durable: durable.as_ref(),
            messages: &messages,
            stop: &stop,
            consumer: &consumer,
            committer: &committer,
            read_through: &read_through,
            paused: false,
            last_commit: Instant::now(),
            next_lag: Instant::now(),
            errors: 0,
        }
        .run();
        finish(&consumer, &committer);
        committer.close(STOP_WAIT);
        // Leaves the group (the revocation's commit runs first); the committer may still hold
        // the consumer if the broker did not answer its last commit.
        drop(consumer);
        match ended {
            Ended::Stopped => return,
            Ended::Fatal(e) => {
                failures += 1;
                options.stats.reachable(false);
                tracing::error!(source = %shown, error = %e, failures, "the Kafka consumer failed for good; making it again");
                std::thread::sleep(REMAKE.after(failures));
            }
        }
    }
}

/// Hands every owned partition's mark to the committer (at stop, or before a consumer is made
/// again).
fn finish(consumer: &BaseConsumer<Context>, committer: &Committer) {
    let mut shared = consumer.context().shared();
    shared.drain();
    let owned = shared.marks.owned();
    let marks = shared.marks.final_marks(&owned);
    if !marks.is_empty() {
        committer.commit(marks);
    }
}

/// Why a consumer's turns ended.
enum Ended {
    /// The spout is gone or asked to stop.
    Stopped,
    /// librdkafka says the consumer cannot go on.
    Fatal(KafkaError),
}

/// The loop over one consumer.
struct Turns<'a> {
    options: &'a KafkaOptions,
    durable: Option<&'a Durable>,
    messages: &'a SyncSender<Message>,
    stop: &'a AtomicBool,
    consumer: &'a BaseConsumer<Context>,
    committer: &'a Committer,
    read_through: &'a ReadThrough,
    paused: bool,
    last_commit: Instant,
    next_lag: Instant,
    errors: u32,
}

impl Turns<'_> {
    fn run(mut self) -> Ended {
        let batch = self.options.batch.max(1);
        loop {
            if self.stop.load(Relaxed) {
                return Ended::Stopped;
            }
            let (parked, blocked) = {
                let mut shared = self.consumer.context().shared();
                shared.drain();
                if shared.rebalanced {
                    shared.rebalanced = false;
                    self.paused = false;
                }
                let blocked = self.hand_out(&mut shared);
                if shared.gone {
                    return Ended::Stopped;
                }
                self.commit(&mut shared);
                self.options
                    .stats
                    .unacked
                    .store(shared.marks.unacked(), Relaxed);
                let read = shared.marks.read_through();
                let mut through = self
                    .read_through
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if *through != read {
                    *through = read;
                }
                (shared.parked.len(), blocked)
            };
            // Paused only once ten batches wait (what librdkafka prefetches): the spout's channel
            // is full now and then for a moment, and each pause drops the prefetch (pausing at
            // one batch cost the bench two thirds of its rate).
            self.pause(parked >= PARK_MOST * batch, parked <= PARK_MOST * batch / 2);
            if Instant::now() >= self.next_lag {
                self.next_lag = Instant::now() + LAG_EVERY;
                self.lag();
            }
            // Waiting on custody to free room: look again soon. Otherwise poll waits for
            // records (and serves the callbacks meanwhile).
            let wait = if blocked {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(20)
            };
            if let Err(e) = self.poll(wait, batch) {
                return Ended::Fatal(e);
            }
        }
    }

    /// Hands out parked records while there is room under `max_unacked` and in the spout's
    /// channel; true if some are left because there is none.
    fn hand_out(&self, shared: &mut Shared) -> bool {
        let stats = &self.options.stats;
        let bound = self.options.max_unacked.max(1);
        while let Some(p) = shared.parked.pop_front() {
            if !shared.marks.owns(p.partition) {
                continue; // revoked meanwhile: its next owner reads it
            }
            if p.known || shared.marks.is_pending(p.partition, p.offset) {
                // In the store's custody (its commit was lost), or still in this node's hands:
                // not handed out again.
                stats.redelivered.fetch_add(1, Relaxed);
                shared.marks.read(p.partition, p.offset, !p.known);
                continue;
            }
            if shared.marks.unacked() >= bound {
                shared.parked.push_front(p);
                return true;
            }
            let (partition, offset) = (p.partition, p.offset);
            match self.messages.try_send(p.message) {
                Ok(()) => shared.marks.read(partition, offset, true),
                Err(TrySendError::Full(message)) => {
                    shared.parked.push_front(Parked { message, ..p });
                    return true;
                }
                Err(TrySendError::Disconnected(_)) => {
                    shared.gone = true;
                    return false;
                }
            }
        }
        false
    }

    /// Commits the marks that moved, asynchronously, when it is time.
    fn commit(&mut self, shared: &mut Shared) {
        let uncommitted = shared.marks.uncommitted();
        if uncommitted == 0 {
            return;
        }
        let soon = i64::try_from(self.options.max_unacked / 4)
            .unwrap_or(i64::MAX)
            .max(1);
        if self.last_commit.elapsed() < self.options.commit_every && uncommitted < soon {
            return;
        }
        self.last_commit = Instant::now();
        let due = shared.marks.due();
        if !due.is_empty() {
            self.committer.commit(due);
        }
    }

    /// Pauses the assigned partitions when `full`, resumes them when `room`.
    fn pause(&mut self, full: bool, room: bool) {
        if full == self.paused || (!full && !room) {
            return;
        }
        let Ok(assigned) = self.consumer.assignment() else {
            return;
        };
        let done = if full {
            self.consumer.pause(&assigned)
        } else {
            self.consumer.resume(&assigned)
        };
        match done {
            Ok(()) => self.paused = full,
            Err(e) => tracing::debug!(error = %e, full, "pausing or resuming partitions failed"),
        }
    }

    /// Asks the broker how much waits past what was read.
    fn lag(&self) {
        let read = self.consumer.context().shared().marks.read_through();
        let mut lag = 0u64;
        for (&partition, &next) in &read {
            match self
                .consumer
                .fetch_watermarks(&self.options.url.topic, partition, LAG_TIMEOUT)
            {
                Ok((_, high)) => lag += u64::try_from(high - next).unwrap_or(0),
                Err(_) => {
                    self.options.stats.reachable(false);
                    return;
                }
            }
        }
        if !read.is_empty() {
            self.options.stats.lag.store(lag, Relaxed);
            self.options.stats.reachable(true);
        }
    }

    /// Polls up to `batch` records, waiting at most `wait` for the first, and parks them (after
    /// asking the store which it already has custody of).
    fn poll(&mut self, wait: Duration, batch: usize) -> Result<(), KafkaError> {
        let mut fresh = Vec::new();
        let mut timeout = wait;
        while fresh.len() < batch {
            match self.consumer.poll(timeout) {
                None => break,
                Some(Ok(m)) => {
                    let headers = m.headers();
                    let record = Record {
                        topic: &self.options.url.topic,
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key(),
                        payload: m.payload(),
                        headers: headers
                            .map(|h| h.iter().map(|h| (h.key, h.value)).collect())
                            .unwrap_or_default(),
                    };
                    let message = mapping::message(&record, &self.options.default_biz);
                    fresh.push(Parked {
                        partition: record.partition,
                        offset: record.offset,
                        message,
                        known: false,
                    });
                    timeout = Duration::ZERO;
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => return Err(e),
                Some(Err(e)) => {
                    self.errors += 1;
                    self.options.stats.reachable(false);
                    if self.errors == 1 || self.errors.is_multiple_of(20) {
                        tracing::warn!(source = %self.consumer.context().shown, error = %e, errors = self.errors, "reading the topic failed; librdkafka tries again");
                    }
                    break;
                }
            }
        }
        if fresh.is_empty() {
            return Ok(());
        }
        self.errors = 0;
        let stats = &self.options.stats;
        stats.reachable(true);
        stats.received.fetch_add(fresh.len() as u64, Relaxed);
        if let Some(durable) = self.durable {
            let ids: Vec<MessageId> = fresh.iter().map(|p| p.message.id.clone()).collect();
            let known = known(durable, &ids);
            for p in &mut fresh {
                p.known = known.contains(&p.message.id);
            }
        }
        self.consumer.context().shared().parked.extend(fresh);
        Ok(())
    }
}

/// Which of `ids` the store already has custody of (an error is logged and taken as none: the
/// records are then processed again, at least once).
fn known(durable: &Durable, ids: &[MessageId]) -> HashSet<MessageId> {
    match durable.known(ids) {
        Ok(known) => known,
        Err(e) => {
            tracing::warn!(error = %e, "could not ask the store which records it holds; they are processed again");
            HashSet::new()
        }
    }
}
