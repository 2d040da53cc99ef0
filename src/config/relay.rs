//! The relay's sections of the configuration file (`sources.md`): `source:` (the URL and
//! how a message's parts are found) and `handler:` (where each delivery is posted). Both are
//! checked while they are read, as the rest of the file is.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use rebound_sources::amqp::AmqpUrl;
use rebound_sources::jetstream::JetStreamUrl;
#[cfg(feature = "kafka")]
use rebound_sources::kafka::KafkaUrl;
use rebound_store_redis::stream::StreamUrl;
use serde::{Deserialize, Deserializer};

use super::parse;

/// A source URL, by the broker it names.
#[derive(Clone, PartialEq, Eq)]
pub enum SourceUrl {
    /// `redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM?group=G[&start=0|$]`.
    RedisStream(StreamUrl),
    /// `nats://[USER:PASS@]HOST:PORT/STREAM?consumer=NAME[&subject=FILTER][&deliver=all|new]`.
    JetStream(JetStreamUrl),
    /// `amqp://[USER:PASS@]HOST:PORT/[VHOST]?queue=Q`.
    Amqp(AmqpUrl),
    /// `kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G[&offset=earliest|latest]` (feature
    /// `kafka`).
    #[cfg(feature = "kafka")]
    Kafka(KafkaUrl),
}

/// Why a source URL was refused (it never repeats a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceUrlError(String);

impl SourceUrlError {
    /// An error saying `why` (which must not hold a password).
    pub fn new(why: impl Into<String>) -> SourceUrlError {
        SourceUrlError(why.into())
    }
}

const FORMS: &str = "expected redis-stream://HOST:PORT/STREAM?group=G, \
                     nats://HOST:PORT/STREAM?consumer=NAME, amqp://HOST:PORT/[VHOST]?queue=Q \
                     or kafka://HOST:PORT/TOPIC?group=G";

impl SourceUrl {
    /// Parses `url` by its scheme.
    pub fn parse(url: &str) -> Result<SourceUrl, SourceUrlError> {
        let url = url.trim();
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        match scheme {
            "redis-stream" => StreamUrl::parse(url)
                .map(SourceUrl::RedisStream)
                .map_err(|e| SourceUrlError(e.to_string())),
            "nats" => JetStreamUrl::parse(url)
                .map(SourceUrl::JetStream)
                .map_err(|e| SourceUrlError(e.to_string())),
            "amqp" | "amqps" => match AmqpUrl::parse(url) {
                Ok(u) if u.queue().is_some() => Ok(SourceUrl::Amqp(u)),
                Ok(u) => Err(SourceUrlError(format!(
                    "bad source URL {u}: a source reads a queue (?queue=Q), not an exchange; {FORMS}"
                ))),
                Err(e) => Err(SourceUrlError(e.to_string())),
            },
            #[cfg(feature = "kafka")]
            "kafka" => KafkaUrl::parse(url)
                .map(SourceUrl::Kafka)
                .map_err(|e| SourceUrlError(e.to_string())),
            #[cfg(not(feature = "kafka"))]
            "kafka" => Err(SourceUrlError(
                "this build has no Kafka source: build with --features kafka".into(),
            )),
            "" => Err(SourceUrlError(format!(
                "the source URL has no scheme; {FORMS}"
            ))),
            other => Err(SourceUrlError(format!(
                "unknown source scheme {:?}; {FORMS}",
                other.chars().take(24).collect::<String>()
            ))),
        }
    }

    /// The name the source is shown under (metrics, `/readyz`, the report): its stream.
    pub fn name(&self) -> &str {
        match self {
            SourceUrl::RedisStream(u) => &u.stream,
            SourceUrl::JetStream(u) => &u.stream,
            SourceUrl::Amqp(u) => u.queue().unwrap_or_default(),
            #[cfg(feature = "kafka")]
            SourceUrl::Kafka(u) => &u.topic,
        }
    }
}

/// Shown with its password hidden.
impl std::fmt::Display for SourceUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceUrl::RedisStream(u) => u.fmt(f),
            SourceUrl::JetStream(u) => u.fmt(f),
            SourceUrl::Amqp(u) => u.fmt(f),
            #[cfg(feature = "kafka")]
            SourceUrl::Kafka(u) => u.fmt(f),
        }
    }
}

/// Shown as [`Display`](std::fmt::Display) shows it: never with its password.
impl std::fmt::Debug for SourceUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SourceUrl({self})")
    }
}

/// `source:`: `{url: URL, biz: NAME, biz_token: N, fields: {biz, key, payload}, fates_keep: 1h}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSetting {
    /// `--source`: the broker, stream and group or consumer.
    #[serde(default, deserialize_with = "source_url")]
    pub url: Option<SourceUrl>,
    /// The biz of a message that names none (default `DEFAULT`).
    #[serde(default, deserialize_with = "biz")]
    pub biz: Option<String>,
    /// JetStream: the subject token (1-based) that names a message's biz.
    #[serde(default)]
    pub biz_token: Option<NonZeroUsize>,
    /// Redis Streams: the entry fields a message's biz, key and payload come from.
    #[serde(default)]
    pub fields: Fields,
    /// How long the store keeps a retried message's acked fate, to know it if the broker
    /// delivers it again (default 1 h; a broker redelivers within its ack wait or a lease).
    #[serde(default, deserialize_with = "parse::duration")]
    pub fates_keep: Option<Duration>,
}

/// `source.fields:` (each defaults to its own name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fields {
    /// The field of the biz (default `biz`).
    #[serde(default, deserialize_with = "biz")]
    pub biz: Option<String>,
    /// The field of the ordering key (default `key`).
    #[serde(default, deserialize_with = "biz")]
    pub key: Option<String>,
    /// The field of the payload (default `payload`).
    #[serde(default, deserialize_with = "biz")]
    pub payload: Option<String>,
}

/// `handler:`: `{url: URL, timeout: 10s, concurrency: 64, ca_file: FILE}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandlerSetting {
    /// `--handler`: an `http://` or `https://` URL.
    #[serde(default, deserialize_with = "handler_url")]
    pub url: Option<String>,
    /// How long one request may take (default 10 s).
    #[serde(default, deserialize_with = "parse::duration")]
    pub timeout: Option<Duration>,
    /// Requests in flight at most, per node (default 64).
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub concurrency: Option<usize>,
    /// A PEM file of the CA certificates an `https://` handler is checked against, instead
    /// of the system's (read at start).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn source_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SourceUrl>, D::Error> {
    parse::checked_str(d, "a source URL", |s| {
        SourceUrl::parse(s).map(Some).map_err(|e| e.to_string())
    })
}

fn biz<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    parse::checked_str(d, "a name", |s| {
        if s.trim().is_empty() || s.contains(char::is_whitespace) {
            return Err(format!("expected a name without spaces, got {s:?}"));
        }
        Ok(Some(s.to_owned()))
    })
}

fn handler_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    parse::checked_str(d, "an http:// or https:// URL", |s| {
        check_handler_url(s).map(Some)
    })
}

/// `s` if it is an `http://` or `https://` URL with a host, else why not.
pub fn check_handler_url(s: &str) -> Result<String, String> {
    const FORM: &str = "expected http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH";
    let uri: http::Uri = s
        .parse()
        .map_err(|e| format!("bad handler URL {s:?}: {e}; {FORM}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!(
            "bad handler URL {s:?}: not http:// or https://; {FORM}"
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("bad handler URL {s:?}: no host; {FORM}"));
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_url_is_http_or_https_with_a_host() {
        assert!(check_handler_url("http://127.0.0.1:9000/orders").is_ok());
        assert!(check_handler_url("https://orders.internal/rebound").is_ok());
        for (url, says) in [
            ("ftp://127.0.0.1/x", "not http:// or https://"),
            ("http:///x", "bad handler URL"),
            ("127.0.0.1:9000", "not http"),
        ] {
            let e = check_handler_url(url).expect_err(url);
            assert!(e.contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn a_url_is_read_by_its_scheme_and_never_shows_its_password() {
        let redis = SourceUrl::parse("redis-stream://u:s3cret@127.0.0.1:6379/orders?group=g")
            .expect("a Redis stream");
        assert!(matches!(redis, SourceUrl::RedisStream(_)));
        assert_eq!(redis.name(), "orders");
        assert!(!format!("{redis} {redis:?}").contains("s3cret"));
        let nats = SourceUrl::parse("nats://u:s3cret@127.0.0.1:4222/ORDERS?consumer=rebound")
            .expect("a JetStream stream");
        assert_eq!(nats.name(), "ORDERS");
        assert!(!format!("{nats} {nats:?}").contains("s3cret"));
        let amqp = SourceUrl::parse("amqp://u:s3cret@127.0.0.1:5672/shop?queue=orders")
            .expect("a RabbitMQ queue");
        assert!(matches!(amqp, SourceUrl::Amqp(_)));
        assert_eq!(amqp.name(), "orders");
        assert!(!format!("{amqp} {amqp:?}").contains("s3cret"));
        #[cfg(feature = "kafka")]
        {
            let kafka = SourceUrl::parse("kafka://127.0.0.1:9092,127.0.0.1:9093/orders?group=g")
                .expect("a Kafka topic");
            assert_eq!(kafka.name(), "orders");
            assert!(matches!(kafka, SourceUrl::Kafka(_)));
            let e = SourceUrl::parse("kafka://u:s3cret@127.0.0.1:9092/orders?group=g")
                .expect_err("credentials are refused")
                .to_string();
            assert!(
                e.contains("neither SASL nor TLS") && !e.contains("s3cret"),
                "{e}"
            );
        }
        #[cfg(not(feature = "kafka"))]
        {
            let e = SourceUrl::parse("kafka://127.0.0.1:9092/orders?group=g")
                .expect_err("no Kafka in this build")
                .to_string();
            assert_eq!(
                e,
                "this build has no Kafka source: build with --features kafka"
            );
        }
        for (url, says) in [
            ("amqp://127.0.0.1:5672/?exchange=dead", "reads a queue"),
            (
                "amqps://u:s3cret@127.0.0.1:5671/?queue=q",
                "TLS) is not in this build",
            ),
            ("amqp://127.0.0.1/?queue=q", "the port is required"),
            ("http://127.0.0.1/orders", "unknown source scheme"),
            ("orders", "no scheme"),
            ("redis-stream://127.0.0.1:6379/orders", "group"),
        ] {
            let e = SourceUrl::parse(url).expect_err(url).to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
        let e = SourceUrl::parse("redis-stream://u:s3cret@127.0.0.1:6379/orders")
            .expect_err("no group")
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
}
