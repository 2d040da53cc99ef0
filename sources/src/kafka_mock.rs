//! [`KafkaMock`]: librdkafka's mock cluster (`rdkafka::mocking::MockCluster`), a broker that
//! speaks the Kafka protocol on loopback sockets inside the test process, owned by a thread of
//! its own (the cluster is a C handle that may not move between threads), for this crate's
//! Kafka tests and the product's relay test. No Kafka broker can be installed on the machines
//! the project runs on; the mock can host producers (idempotent ones too), consumer groups with
//! rebalances and committed offsets, and it can take its brokers down and up.
//!
//! What a "kill" is here: [`KafkaMock::kill`] takes every broker down (their listeners refuse
//! and their connections close, as a dead process's would) and [`KafkaMock::restart`] brings
//! them up on the same ports. The mock's log and committed offsets live in memory for as long
//! as the `KafkaMock` does, so a restart finds all of them: it stands for a broker restarted
//! with its persistence on, not for one that lost its disk. There is no SASL or TLS listener.

use std::sync::mpsc;
use std::thread::JoinHandle;

use rdkafka::mocking::MockCluster;

/// What the owning thread is asked to do.
enum Ask {
    Topic(String, i32, mpsc::Sender<Result<(), String>>),
    Down(mpsc::Sender<Result<(), String>>),
    Up(mpsc::Sender<Result<(), String>>),
}

/// A mock Kafka cluster owned by a test (see the [module docs](self)); gone when dropped.
pub struct KafkaMock {
    bootstrap: String,
    asks: Option<mpsc::Sender<Ask>>,
    owner: Option<JoinHandle<()>>,
}

impl KafkaMock {
    /// A cluster of `brokers` brokers on free loopback ports. Panics if librdkafka cannot make
    /// one.
    pub fn start(brokers: i32) -> KafkaMock {
        let (asks, rx) = mpsc::channel::<Ask>();
        let (ready, ready_rx) = mpsc::channel();
        let owner = std::thread::Builder::new()
            .name("kafka-mock".into())
            .spawn(move || {
                let cluster = match MockCluster::new(brokers) {
                    Ok(cluster) => cluster,
                    Err(e) => {
                        let _ = ready.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready.send(Ok(cluster.bootstrap_servers()));
                let said = |r: rdkafka::error::KafkaResult<()>| r.map_err(|e| e.to_string());
                for ask in rx {
                    match ask {
                        Ask::Topic(name, partitions, reply) => {
                            let _ = reply.send(said(cluster.create_topic(&name, partitions, 1)));
                        }
                        Ask::Down(reply) => {
                            let _ = reply.send(said(cluster.broker_down(-1)));
                        }
                        Ask::Up(reply) => {
                            let _ = reply.send(said(cluster.broker_up(-1)));
                        }
                    }
                }
            })
            .expect("a thread for the mock Kafka cluster");
        let bootstrap = ready_rx
            .recv()
            .expect("the mock cluster's thread answers")
            .unwrap_or_else(|e| panic!("librdkafka could not make a mock cluster: {e}"));
        KafkaMock {
            bootstrap,
            asks: Some(asks),
            owner: Some(owner),
        }
    }

    /// The brokers, `HOST:PORT,HOST:PORT` (librdkafka's `bootstrap.servers`).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    fn ask(&self, ask: impl FnOnce(mpsc::Sender<Result<(), String>>) -> Ask, what: &str) {
        let (reply, rx) = mpsc::channel();
        self.asks
            .as_ref()
            .expect("the mock cluster runs")
            .send(ask(reply))
            .expect("the mock cluster's thread runs");
        if let Err(e) = rx.recv().expect("the mock cluster's thread answers") {
            panic!("the mock cluster could not {what}: {e}");
        }
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.ask(
            |r| Ask::Topic(topic.to_owned(), partitions, r),
            "create the topic",
        );
    }

    /// Takes every broker down (see the [module docs](self)).
    pub fn kill(&self) {
        self.ask(Ask::Down, "take its brokers down");
    }

    /// Brings every broker up again, on the same ports, with what they held.
    pub fn restart(&self) {
        self.ask(Ask::Up, "bring its brokers up");
    }
}

impl Drop for KafkaMock {
    fn drop(&mut self) {
        self.asks = None;
        if let Some(owner) = self.owner.take() {
            let _ = owner.join();
        }
    }
}
