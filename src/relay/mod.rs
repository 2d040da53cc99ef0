//! `rebound relay` (`docs/spec/sources.md`, "`rebound relay`"): a team's own service, in any
//! language, behind Rebound's retries. Each delivery from the source is one call to the
//! team's HTTP handler, and its answer is the message's fate.
//!
//! - `handler.rs`: the handler's client ([`Handler`]): the request, the concurrency bound,
//!   the timeout, TLS through [`crate::outbound`].
//! - `answer.rs`: the answer read as a fate ([`Answer`], [`AnswerClass`]), the table of
//!   sources.md row by row.
//! - [`source`]: the source it reads; [`bolt`]: the bolt that calls the handler for each
//!   delivery; [`report`]: what it prints after its stop; [`publish`]: each stored dead letter
//!   also published to the broker (`dead_letters.publish`). The job that puts them together is
//!   `app::relay`.

mod answer;
pub mod bolt;
mod handler;
pub mod publish;
pub mod report;
pub mod source;

pub use answer::{Answer, AnswerClass, HANDLER_TIMEOUT, HANDLER_UNAVAILABLE, MAX_FAILURE_BODY};
pub use handler::{Delivery, Handler, HandlerError, HandlerOptions};

#[cfg(test)]
mod tests;
