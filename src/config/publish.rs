//! `dead_letters: {publish: URL}` (`sources.md`, "Dead letters to the broker"): where each
//! stored dead letter is also published. The URL is a source URL's form without what only a
//! reader needs: `redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM` (a `?group=` copied from
//! a source URL is taken and means nothing here), `nats://[USER:PASS@]HOST:PORT/SUBJECT` or
//! `amqp://[USER:PASS@]HOST:PORT/[VHOST]?exchange=E[&routing_key=K]` (a RabbitMQ exchange).
//! The relay's publisher (`relay::publish`) sends to it.

use std::fmt;

use rebound_sources::amqp::{AmqpTarget, AmqpUrl};
use rebound_sources::jetstream::percent_decode as decode;
use serde::{Deserialize, Deserializer};

use super::parse;

/// Where dead letters are published, by the broker it names. Shown (`Display`, `Debug`)
/// with everything up to the last `@` of its authority hidden.
#[derive(Clone, PartialEq, Eq)]
pub enum PublishUrl {
    /// `XADD` to a Redis stream.
    RedisStream {
        /// The server as redis-rs takes it (`redis://[USER:PASS@]HOST:PORT[/DB]`).
        server: String,
        /// The stream's key.
        stream: String,
    },
    /// A JetStream publish, its ack awaited.
    JetStream {
        /// The server, `HOST:PORT` (no credentials: they go in the CONNECT).
        server: String,
        /// The user and password, percent-decoded, if the URL names them.
        credentials: Option<(String, String)>,
        /// The subject a stream of the server captures.
        subject: String,
    },
    /// A RabbitMQ publish to an exchange, confirmed and routed (`mandatory`).
    Amqp(AmqpUrl),
    /// A Kafka produce (feature `kafka`), acknowledged by every in-sync replica.
    #[cfg(feature = "kafka")]
    Kafka {
        /// The bootstrap brokers, `HOST:PORT[,HOST:PORT]`.
        brokers: String,
        /// The topic.
        topic: String,
    },
}

/// Why a publish URL was refused (it never repeats a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PublishUrlError(String);

const REDIS: &str = "redis-stream://";
const NATS: &str = "nats://";
const FORMS: &str = "expected redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM, \
                     nats://[USER:PASS@]HOST:PORT/SUBJECT, \
                     amqp://[USER:PASS@]HOST:PORT/[VHOST]?exchange=E[&routing_key=K] or \
                     kafka://HOST:PORT[,HOST:PORT]/TOPIC";

impl PublishUrl {
    /// Parses `url` by its scheme.
    pub fn parse(url: &str) -> Result<PublishUrl, PublishUrlError> {
        let url = url.trim();
        let fail = |why: String| PublishUrlError(format!("bad publish URL {}: {why}", redact(url)));
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        match scheme {
            "redis-stream" | "nats" => {}
            "amqp" | "amqps" => {
                let u = AmqpUrl::parse(url).map_err(|e| {
                    PublishUrlError(format!("bad publish URL {}: {}", e.shown, e.why))
                })?;
                if !matches!(u.target, AmqpTarget::Exchange { .. }) {
                    return Err(fail(format!(
                        "dead letters are published to an exchange (?exchange=E), not a queue; {FORMS}"
                    )));
                }
                return Ok(PublishUrl::Amqp(u));
            }
            #[cfg(feature = "kafka")]
            "kafka" => return kafka(url).map_err(fail),
            #[cfg(not(feature = "kafka"))]
            "kafka" => {
                return Err(fail(
                    "this build has no Kafka publishing: build with --features kafka".into(),
                ));
            }
            "" => return Err(fail(format!("it has no scheme; {FORMS}"))),
            _ => return Err(fail(format!("unknown scheme; {FORMS}"))),
        }
        let rest = &url[scheme.len() + "://".len()..];
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = before_query
            .split_once('/')
            .ok_or_else(|| fail(format!("it names no stream or subject; {FORMS}")))?;
        // Nothing of the authority is repeated in an error (a password with a raw `/` would
        // be cut there and show up as the host).
        let (user_info, host_port) = match authority.rsplit_once('@') {
            Some((info, host_port)) => (Some(info), host_port),
            None => (None, authority),
        };
        let port_ok = host_port
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !port_ok {
            return Err(fail(format!(
                "it names no HOST:PORT (the port is required); {FORMS}"
            )));
        }
        if scheme == "redis-stream" {
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                if !pair.starts_with("group=") {
                    return Err(fail(format!(
                        "unknown parameter '{pair}' (a publish URL takes none); {FORMS}"
                    )));
                }
            }
            let (db, stream) = match path.split('/').collect::<Vec<_>>()[..] {
                [stream] => (None, stream),
                [db, stream] => {
                    let db: u32 = db
                        .parse()
                        .map_err(|_| fail(format!("'{db}' is not a database number; {FORMS}")))?;
                    (Some(db), stream)
                }
                _ => return Err(fail(format!("too many path segments; {FORMS}"))),
            };
            if stream.is_empty() {
                return Err(fail(format!("it names no stream; {FORMS}")));
            }
            let server = match db {
                Some(db) => format!("redis://{authority}/{db}"),
                None => format!("redis://{authority}"),
            };
            // redis-rs's own reading of the server (its error never repeats the URL).
            redis::Client::open(server.as_str())
                .map_err(|_| fail(format!("redis-rs does not take its HOST:PORT; {FORMS}")))?;
            return Ok(PublishUrl::RedisStream {
                server,
                stream: stream.to_owned(),
            });
        }
        if !query.is_empty() {
            return Err(fail(format!(
                "a publish URL takes no parameters ('?{query}'); {FORMS}"
            )));
        }
        let credentials = match user_info {
            None => None,
            Some(info) => {
                let (user, password) = info.split_once(':').ok_or_else(|| {
                    fail(format!(
                        "the user-info before '@' is not USER:PASS; {FORMS}"
                    ))
                })?;
                if user.is_empty() {
                    return Err(fail(format!("the user before ':' is empty; {FORMS}")));
                }
                let user = decode(user).map_err(|why| fail(format!("the user {why}")))?;
                let password =
                    decode(password).map_err(|why| fail(format!("the password {why}")))?;
                Some((user, password))
            }
        };
        check_subject(path).map_err(fail)?;
        host_port.parse::<async_nats::ServerAddr>().map_err(|_| {
            fail(format!(
                "the NATS client does not take its HOST:PORT; {FORMS}"
            ))
        })?;
        Ok(PublishUrl::JetStream {
            server: host_port.to_owned(),
            credentials,
            subject: path.to_owned(),
        })
    }

    /// The stream or subject published to (for log lines and the metrics' help).
    pub fn target(&self) -> &str {
        match self {
            PublishUrl::RedisStream { stream, .. } => stream,
            PublishUrl::JetStream { subject, .. } => subject,
            PublishUrl::Amqp(u) => match &u.target {
                AmqpTarget::Exchange { exchange, .. } => exchange,
                AmqpTarget::Queue(queue) => queue,
            },
            #[cfg(feature = "kafka")]
            PublishUrl::Kafka { topic, .. } => topic,
        }
    }
}

/// Shown with everything up to the authority's last `@` hidden.
impl fmt::Display for PublishUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishUrl::RedisStream { server, stream } => {
                let shown = redact(server);
                let server = shown.strip_prefix("redis://").unwrap_or(&shown);
                write!(f, "{REDIS}{server}/{stream}")
            }
            PublishUrl::JetStream {
                server,
                credentials,
                subject,
            } => {
                let hidden = if credentials.is_some() { "***@" } else { "" };
                write!(f, "{NATS}{hidden}{server}/{subject}")
            }
            PublishUrl::Amqp(u) => u.fmt(f),
            #[cfg(feature = "kafka")]
            PublishUrl::Kafka { brokers, topic } => write!(f, "kafka://{brokers}/{topic}"),
        }
    }
}

/// Shown as [`Display`](fmt::Display) shows it: never with its password.
impl fmt::Debug for PublishUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublishUrl({self})")
    }
}

/// `kafka://HOST:PORT[,HOST:PORT]/TOPIC` (a `?group=` copied from a source URL is taken and
/// means nothing here), read as the Kafka source's URL is.
#[cfg(feature = "kafka")]
fn kafka(url: &str) -> Result<PublishUrl, String> {
    let (before_query, query) = url.split_once('?').unwrap_or((url, ""));
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        if !pair.starts_with("group=") {
            return Err(format!(
                "unknown parameter '{pair}' (a publish URL takes none); {FORMS}"
            ));
        }
    }
    let source = rebound_sources::kafka::KafkaUrl::parse(&format!("{before_query}?group=-"))
        .map_err(|e| {
            e.why
                .replace("names no topic", "names no topic to publish to")
        })?;
    Ok(PublishUrl::Kafka {
        brokers: source.bootstrap(),
        topic: source.topic,
    })
}

/// `url` with everything up to its last `@` replaced by `***` (a password may hold a raw `/`
/// or `?`, so the last `@` anywhere counts: a path with one is hidden too, never a password
/// shown).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// A subject to publish to: dot-separated tokens, none empty, no wildcard, no whitespace.
fn check_subject(subject: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("the subject '{subject}' {why}; {FORMS}"));
    if subject.is_empty() {
        return Err(format!("it names no subject; {FORMS}"));
    }
    if subject.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("has whitespace");
    }
    if subject.split('.').any(str::is_empty) {
        return bad("has an empty token (two dots, or a dot at an end)");
    }
    if subject.contains(['*', '>']) {
        return bad("has a wildcard ('*' or '>'): a letter is published to one subject");
    }
    if subject.contains('/') {
        return bad("has a '/' (only the subject follows HOST:PORT)");
    }
    Ok(())
}

/// `dead_letters:`: `{publish: URL}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLettersSetting {
    /// Where each stored dead letter is also published.
    #[serde(default, deserialize_with = "publish_url")]
    pub publish: Option<PublishUrl>,
}

fn publish_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PublishUrl>, D::Error> {
    parse::checked_str(d, "a redis-stream:// or nats:// URL", |s| {
        PublishUrl::parse(s).map(Some).map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_what_precedes_its_last_at() {
        assert_eq!(
            redact("http://127.0.0.1:9000/orders"),
            "http://127.0.0.1:9000/orders"
        );
        assert_eq!(
            redact("https://u:p@orders.internal/x"),
            "https://***@orders.internal/x"
        );
        assert_eq!(redact("https://u:p/w@h/x"), "https://***@h/x");
    }

    #[test]
    fn the_forms_parse_and_never_show_their_password() {
        let u = PublishUrl::parse("redis-stream://127.0.0.1:6379/dead").unwrap();
        assert_eq!(
            u,
            PublishUrl::RedisStream {
                server: "redis://127.0.0.1:6379".into(),
                stream: "dead".into()
            }
        );
        assert_eq!(u.to_string(), "redis-stream://127.0.0.1:6379/dead");
        let u = PublishUrl::parse("redis-stream://app:s3cret@h:1/2/dead?group=g").unwrap();
        assert_eq!(
            u,
            PublishUrl::RedisStream {
                server: "redis://app:s3cret@h:1/2".into(),
                stream: "dead".into()
            }
        );
        assert_eq!(u.to_string(), "redis-stream://***@h:1/2/dead");
        assert!(!format!("{u:?}").contains("s3cret"));
        let u = PublishUrl::parse("nats://app:p%40ss@h:4222/dead.orders").unwrap();
        assert_eq!(
            u,
            PublishUrl::JetStream {
                server: "h:4222".into(),
                credentials: Some(("app".into(), "p@ss".into())),
                subject: "dead.orders".into()
            }
        );
        assert_eq!(u.to_string(), "nats://***@h:4222/dead.orders");
        assert_eq!(u.target(), "dead.orders");
        assert!(!format!("{u:?}").contains("p@ss"));
        let u = PublishUrl::parse("nats://127.0.0.1:4222/dead").unwrap();
        assert_eq!(u.to_string(), "nats://127.0.0.1:4222/dead");
        let u = PublishUrl::parse("amqp://app:p%40ss@h:5672/?exchange=dead&routing_key=orders")
            .unwrap();
        assert!(matches!(u, PublishUrl::Amqp(_)));
        assert_eq!(u.target(), "dead");
        assert_eq!(
            u.to_string(),
            "amqp://app:***@h:5672/?exchange=dead&routing_key=orders"
        );
        assert!(!format!("{u:?}").contains("p@ss"));
        #[cfg(feature = "kafka")]
        {
            let u = PublishUrl::parse("kafka://k1:9092,k2:9092/dead.orders?group=g").unwrap();
            assert_eq!(
                u,
                PublishUrl::Kafka {
                    brokers: "k1:9092,k2:9092".into(),
                    topic: "dead.orders".into()
                }
            );
            assert_eq!(u.to_string(), "kafka://k1:9092,k2:9092/dead.orders");
            assert_eq!(u.target(), "dead.orders");
        }
    }

    #[test]
    fn a_bad_url_says_what_is_wrong_and_never_shows_the_password() {
        for (url, says) in [
            (
                "amqp://u:pw@h:5672/dead",
                "names no queue (?queue=Q) nor exchange",
            ),
            ("amqp://u:pw@h:5672/?queue=dead", "published to an exchange"),
            (
                "amqps://u:pw@h:5671/?exchange=dead",
                "TLS) is not in this build",
            ),
            #[cfg(not(feature = "kafka"))]
            ("kafka://u:pw@h:9092/dead", "build with --features kafka"),
            #[cfg(feature = "kafka")]
            ("kafka://u:pw@h:9092/dead", "neither SASL nor TLS"),
            #[cfg(feature = "kafka")]
            ("kafka://h:9092/", "names no topic"),
            #[cfg(feature = "kafka")]
            ("kafka://h:9092/dead?offset=latest", "unknown parameter"),
            ("http://u:pw@h:1/dead", "unknown scheme"),
            ("dead", "no scheme"),
            ("redis-stream://u:pw@h:1", "names no stream"),
            ("redis-stream://u:pw@h/dead", "HOST:PORT"),
            ("redis-stream://u:pw@h:0/dead", "HOST:PORT"),
            ("redis-stream://u:pw@h:1/x/dead", "not a database number"),
            ("redis-stream://u:pw@h:1/0/", "names no stream"),
            ("redis-stream://u:pw@h:1/dead?start=0", "unknown parameter"),
            ("nats://u:pw@h:1/", "names no subject"),
            ("nats://u:pw@h:1/dead.>", "wildcard"),
            ("nats://u:pw@h:1/dead..x", "empty token"),
            ("nats://u:pw@h:1/dead?consumer=c", "takes no parameters"),
            ("nats://token@h:1/dead", "not USER:PASS"),
            ("nats://u:p%zz@h:1/dead", "the password has a '%'"),
            ("nats://u:p/w@h:1/dead", "HOST:PORT"),
        ] {
            let text = PublishUrl::parse(url).expect_err(url).to_string();
            assert!(text.contains(says), "{url}: {text}");
            assert!(
                !text.contains("pw") && !text.contains("p/w") && !text.contains("p%zz"),
                "{url}: {text}"
            );
        }
    }
}
