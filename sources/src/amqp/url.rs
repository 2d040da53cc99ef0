//! The RabbitMQ URLs (`sources.md`): the source's
//! `amqp://[USER:PASS@]HOST:PORT/[VHOST]?queue=Q`, and the dead letters' exchange
//! `amqp://[USER:PASS@]HOST:PORT/[VHOST]?exchange=E[&routing_key=K]`. One type, [`AmqpUrl`],
//! for both: the broker and its virtual host, and what is read or written there
//! ([`AmqpTarget`]).

use std::fmt;

use crate::url_text::{decode, redact};

/// What an [`AmqpUrl`] names on its broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmqpTarget {
    /// A queue to consume (`?queue=Q`).
    Queue(String),
    /// An exchange to publish to (`?exchange=E[&routing_key=K]`; `exchange=` empty is the
    /// default exchange, which routes by the routing key as a queue's name).
    Exchange {
        /// The exchange.
        exchange: String,
        /// The routing key of every message published (empty when not given).
        routing_key: String,
    },
}

/// A parsed `amqp://` URL. Its password is kept out of sight: [`fmt::Display`] and
/// [`fmt::Debug`] show `***` in its place.
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpUrl {
    /// The broker's host.
    pub host: String,
    /// The broker's port.
    pub port: u16,
    /// The user, when the URL names one (else RabbitMQ's default, `guest`).
    pub user: Option<String>,
    password: Option<String>,
    /// The virtual host (`/` when the path is empty).
    pub vhost: String,
    /// The queue read, or the exchange written.
    pub target: AmqpTarget,
}

/// Why an `amqp://` URL was refused (it never repeats a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad AMQP URL {shown}: {why}")]
pub struct AmqpUrlError {
    /// The URL with its password hidden.
    pub shown: String,
    /// What is wrong, and what is expected.
    pub why: String,
}

const SCHEME: &str = "amqp://";
const FORM: &str = "expected amqp://[USER:PASS@]HOST:PORT/[VHOST]?queue=Q (a source) or \
                    amqp://[USER:PASS@]HOST:PORT/[VHOST]?exchange=E[&routing_key=K] (dead letters)";

impl AmqpUrl {
    /// Parses `url`. User, password, virtual host and the query's values are
    /// percent-decoded (write `@`, `/`, `:` and `?` in them as `%40`, `%2F`, `%3A` and `%3F`;
    /// the virtual host `/` is an empty path or `%2F`).
    pub fn parse(url: &str) -> Result<AmqpUrl, AmqpUrlError> {
        let fail = |why: String| AmqpUrlError {
            shown: redact(url),
            why,
        };
        let rest = url.strip_prefix(SCHEME).ok_or_else(|| {
            let why = if url.starts_with("amqps://") {
                format!("amqps:// (TLS) is not in this build; {FORM}")
            } else {
                format!("it does not begin with {SCHEME}; {FORM}")
            };
            fail(why)
        })?;
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = before_query.split_once('/').unwrap_or((before_query, ""));
        // Nothing of the authority is repeated in an error: a password with a raw `/` or `?`
        // would be cut there and show up as the host or port.
        let (user_info, host_port) = match authority.rsplit_once('@') {
            Some((user_info, host_port)) => (Some(user_info), host_port),
            None => (None, authority),
        };
        let (user, password) = match user_info {
            None => (None, None),
            Some(info) => {
                let (user, password) = info.split_once(':').ok_or_else(|| {
                    fail(format!("the user-info before '@' is not USER:PASS; {FORM}"))
                })?;
                if user.is_empty() {
                    return Err(fail(format!("the user before ':' is empty; {FORM}")));
                }
                let user = decode(user).map_err(|why| fail(format!("the user {why}")))?;
                let password =
                    decode(password).map_err(|why| fail(format!("the password {why}")))?;
                (Some(user), Some(password))
            }
        };
        let (host, port) = host_port.rsplit_once(':').ok_or_else(|| {
            fail(format!(
                "it names no HOST:PORT (the port is required); {FORM}"
            ))
        })?;
        if host.is_empty() {
            return Err(fail(format!("the host before the port is empty; {FORM}")));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| fail(format!("the port is not a number from 1 to 65535; {FORM}")))?;
        if path.contains('/') {
            return Err(fail(format!(
                "the path has more than one segment: only the virtual host follows HOST:PORT \
                 (write a '/' in it as %2F); {FORM}"
            )));
        }
        let vhost = match decode(path).map_err(|why| fail(format!("the virtual host {why}")))? {
            v if v.is_empty() => "/".to_owned(),
            v => v,
        };

        let (mut queue, mut exchange, mut routing_key) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| fail(format!("the parameter '{pair}' has no '=VALUE'; {FORM}")))?;
            let value =
                decode(value).map_err(|why| fail(format!("the value of '{name}' {why}")))?;
            let slot = match name {
                "queue" => &mut queue,
                "exchange" => &mut exchange,
                "routing_key" => &mut routing_key,
                _ => return Err(fail(format!("unknown parameter '{name}'; {FORM}"))),
            };
            if slot.replace(value).is_some() {
                return Err(fail(format!("the parameter '{name}' is given twice")));
            }
        }
        let target = match (queue, exchange) {
            (Some(_), Some(_)) => {
                return Err(fail(format!(
                    "it names both a queue and an exchange; {FORM}"
                )));
            }
            (None, None) => {
                return Err(fail(format!(
                    "it names no queue (?queue=Q) nor exchange (?exchange=E); {FORM}"
                )));
            }
            (Some(queue), None) => {
                if routing_key.is_some() {
                    return Err(fail(
                        "routing_key goes with an exchange (dead letters), not a queue".into(),
                    ));
                }
                check_name("queue", &queue, false).map_err(fail)?;
                AmqpTarget::Queue(queue)
            }
            (None, Some(exchange)) => {
                check_name("exchange", &exchange, true).map_err(fail)?;
                let routing_key = routing_key.unwrap_or_default();
                if routing_key.len() > 255 {
                    return Err(fail("the routing key is longer than 255 bytes".into()));
                }
                AmqpTarget::Exchange {
                    exchange,
                    routing_key,
                }
            }
        };
        Ok(AmqpUrl {
            host: host.to_owned(),
            port,
            user,
            password,
            vhost,
            target,
        })
    }

    /// The queue a source URL names (`None` for an exchange's URL).
    pub fn queue(&self) -> Option<&str> {
        match &self.target {
            AmqpTarget::Queue(q) => Some(q),
            AmqpTarget::Exchange { .. } => None,
        }
    }

    /// What the client connects with (the credentials go in the connection's start, never
    /// in a text the client shows).
    pub(crate) fn uri(&self) -> lapin::uri::AMQPUri {
        let mut uri = lapin::uri::AMQPUri {
            vhost: self.vhost.clone(),
            ..Default::default()
        };
        uri.authority.host = self.host.clone();
        uri.authority.port = self.port;
        if let (Some(user), Some(password)) = (&self.user, &self.password) {
            uri.authority.userinfo.username = user.clone();
            uri.authority.userinfo.password = password.clone();
        }
        // Heartbeats every 10 s: a broker that died without closing the socket is noticed
        // within a few of them.
        uri.query.heartbeat = Some(10);
        uri.query.connection_timeout = Some(5_000);
        uri
    }
}

/// A queue's or an exchange's name as RabbitMQ takes it: at most 255 bytes, nothing
/// unprintable; empty only for the default exchange.
fn check_name(what: &str, name: &str, may_be_empty: bool) -> Result<(), String> {
    if name.is_empty() && !may_be_empty {
        return Err(format!("the {what} name is empty"));
    }
    if name.len() > 255 {
        return Err(format!("the {what} name is longer than 255 bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("the {what} name '{name}' has a control character"));
    }
    Ok(())
}

impl fmt::Display for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}")?;
        if let Some(user) = &self.user {
            write!(f, "{user}:***@")?;
        }
        let vhost = if self.vhost == "/" {
            String::new()
        } else {
            self.vhost.replace('%', "%25").replace('/', "%2F")
        };
        write!(f, "{}:{}/{vhost}", self.host, self.port)?;
        match &self.target {
            AmqpTarget::Queue(q) => write!(f, "?queue={q}"),
            AmqpTarget::Exchange {
                exchange,
                routing_key,
            } => {
                write!(f, "?exchange={exchange}")?;
                if !routing_key.is_empty() {
                    write!(f, "&routing_key={routing_key}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Debug for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AmqpUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_url_names_broker_vhost_and_queue() {
        let u = AmqpUrl::parse("amqp://127.0.0.1:5672/?queue=orders").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 5672));
        assert_eq!(u.vhost, "/", "an empty path is the default virtual host");
        assert_eq!(u.queue(), Some("orders"));
        assert_eq!(u.user, None);
        assert_eq!(u.to_string(), "amqp://127.0.0.1:5672/?queue=orders");

        let u = AmqpUrl::parse("amqp://app:s%40cret@mq:5673/shop%2Feu?queue=a%20b").unwrap();
        assert_eq!(u.vhost, "shop/eu");
        assert_eq!(u.queue(), Some("a b"));
        assert_eq!(u.user.as_deref(), Some("app"));
        let uri = u.uri();
        assert_eq!(uri.authority.userinfo.password, "s@cret");
        assert_eq!((uri.vhost.as_str(), uri.authority.port), ("shop/eu", 5673));
        assert_eq!(u.to_string(), "amqp://app:***@mq:5673/shop%2Feu?queue=a b");
        assert!(!format!("{u:?}").contains("s@cret"));

        let u = AmqpUrl::parse("amqp://mq:5672/%2F?queue=q").unwrap();
        assert_eq!(u.vhost, "/");
        let u = AmqpUrl::parse("amqp://mq:5672?queue=q").unwrap();
        assert_eq!(
            u.vhost, "/",
            "no path at all is the default virtual host too"
        );
    }

    #[test]
    fn a_publish_url_names_an_exchange_and_a_routing_key() {
        let u = AmqpUrl::parse("amqp://mq:5672/?exchange=dead&routing_key=orders.dead").unwrap();
        assert_eq!(
            u.target,
            AmqpTarget::Exchange {
                exchange: "dead".into(),
                routing_key: "orders.dead".into()
            }
        );
        assert_eq!(u.queue(), None);
        assert_eq!(
            u.to_string(),
            "amqp://mq:5672/?exchange=dead&routing_key=orders.dead"
        );
        // The default exchange, routing to the queue named by the key.
        let u = AmqpUrl::parse("amqp://mq:5672/?exchange=&routing_key=dead-letters").unwrap();
        assert!(matches!(&u.target, AmqpTarget::Exchange { exchange, .. } if exchange.is_empty()));
    }

    #[test]
    fn what_is_wrong_is_named_and_the_password_is_never_shown() {
        let cases = [
            ("nats://mq:1/?queue=q", "does not begin with amqp://"),
            (
                "amqps://u:pw-secret@mq:1/?queue=q",
                "amqps:// (TLS) is not in this build",
            ),
            ("amqp://mq/?queue=q", "the port is required"),
            ("amqp://:5672/?queue=q", "the host before the port is empty"),
            ("amqp://mq:0/?queue=q", "not a number from 1 to 65535"),
            ("amqp://mq:5672/a/b?queue=q", "more than one segment"),
            ("amqp://mq:5672/", "names no queue"),
            ("amqp://mq:5672/?queue=", "the queue name is empty"),
            (
                "amqp://mq:5672/?queue=a&exchange=b",
                "both a queue and an exchange",
            ),
            (
                "amqp://mq:5672/?queue=a&routing_key=b",
                "routing_key goes with an exchange",
            ),
            ("amqp://mq:5672/?queue=a&queue=b", "given twice"),
            (
                "amqp://mq:5672/?prefetch=3&queue=a",
                "unknown parameter 'prefetch'",
            ),
            ("amqp://mq:5672/?queue", "has no '=VALUE'"),
            (
                "amqp://mq:5672/?queue=%zz",
                "not followed by two hex digits",
            ),
            ("amqp://u@mq:5672/?queue=q", "not USER:PASS"),
            (
                "amqp://u:pw-secret@mq:5672/x/y?queue=q",
                "more than one segment",
            ),
            (
                // A raw '/' in a password cuts the authority there: the port is refused.
                "amqp://u:pw/secret@mq:5672/?queue=q",
                "the port is not a number",
            ),
        ];
        for (url, why) in cases {
            let e = AmqpUrl::parse(url).expect_err(url).to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{url} shows its password: {e}");
        }
    }
}
