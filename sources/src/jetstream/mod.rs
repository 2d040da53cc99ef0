//! The NATS JetStream source (`sources.md`, "Sources"): so far its URL,
//! `nats://[USER:PASS@]HOST:PORT/STREAM?consumer=NAME[&subject=FILTER][&deliver=all|new]`.

mod url;

pub use url::{Deliver, JetStreamUrl, JetStreamUrlError};
