//! `rebound relay` end to end: the real binary between a broker the test starts and a
//! handler the test runs (`sources.md`). `support` runs both.

mod amqp;
mod fates;
mod fleet;
mod jetstream;
#[cfg(feature = "kafka")]
mod kafka;
mod publish;
mod readme;
mod redis_stream;
mod refusals;
mod support;
mod tls;
