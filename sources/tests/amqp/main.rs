//! The RabbitMQ source against a `rabbitmq-server` of each test's own: the source suite
//! (every case of `sources.md`'s promises, through [`harness::RabbitHarness`]), and what only
//! RabbitMQ does (`specific.rs`).
//!
//! Every wait is on a condition with a generous deadline; nothing asserts on timings.

mod harness;
mod specific;

rebound_runtime::source_suite!(amqp_suite, harness::RabbitHarness);
