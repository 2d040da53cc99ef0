//! The RabbitMQ source against a `rabbitmq-server` of each test's own: the source suite
//! (every case of `sources.md`'s promises, through [`harness::RabbitHarness`]), and what only
//! RabbitMQ does (`specific.rs`).
//!
//! Every case of the suite runs. One check reads differently, through the harness's
//! `unacked_after_death`: in `a_consumer_killed_before_custody_gets_what_it_held_again`,
//! RabbitMQ puts a dead consumer's deliveries back in the queue the moment its connection
//! closes (Redis and JetStream keep them pending to it), so "the killed consumer left 10
//! unacknowledged" is checked as the queue's whole count (ready and unacknowledged: nothing
//! acknowledged, nothing lost); the rest of the case (the same ten, with the same ids, to the
//! next consumer) is as for every source.
//!
//! Every wait is on a condition with a generous deadline; nothing asserts on timings.

mod harness;
mod specific;

rebound_runtime::source_suite!(amqp_suite, harness::RabbitHarness);
