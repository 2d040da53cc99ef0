//! The source's URL, `kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G[&offset=earliest|latest]`
//! (`sources.md`), and what it names.

use std::fmt;

/// Where a consumer group that has committed nothing for a partition starts reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// From the oldest record the broker holds (`offset=earliest`, the default): a new
    /// deployment never skips records already waiting.
    Earliest,
    /// Only records produced after the group's first read (`offset=latest`).
    Latest,
}

impl StartAt {
    /// librdkafka's `auto.offset.reset` for it.
    pub fn as_str(self) -> &'static str {
        match self {
            StartAt::Earliest => "earliest",
            StartAt::Latest => "latest",
        }
    }
}

/// A parsed `kafka://` source URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaUrl {
    /// The bootstrap brokers, `HOST:PORT` each, in the URL's order.
    pub brokers: Vec<String>,
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// Where a partition the group has committed nothing for starts.
    pub start: StartAt,
}

/// Why a `kafka://` URL was refused. It never repeats what stood before an `@` (a URL with
/// credentials is refused, and they are not shown).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad source URL {shown}: {why}")]
pub struct KafkaUrlError {
    /// The URL, with anything before an `@` hidden.
    pub shown: String,
    /// What is wrong, and what is expected.
    pub why: String,
}

const SCHEME: &str = "kafka://";
const FORM: &str = "expected kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G[&offset=earliest|latest]";

impl KafkaUrl {
    /// Parses `url`. The query's values are taken as they are (a group name has no character
    /// that needs escaping in a URL's query but `&`, `=` and whitespace, which it may not have).
    pub fn parse(url: &str) -> Result<KafkaUrl, KafkaUrlError> {
        let fail = |why: String| KafkaUrlError {
            shown: redact(url),
            why,
        };
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| fail(format!("it does not begin with {SCHEME}; {FORM}")))?;
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = before_query
            .split_once('/')
            .ok_or_else(|| fail(format!("it names no topic; {FORM}")))?;
        if authority.contains('@') {
            return Err(fail(
                "it carries credentials (USER:PASS@), and this build's Kafka source speaks \
                 neither SASL nor TLS: name the brokers alone"
                    .into(),
            ));
        }
        let mut brokers = Vec::new();
        for broker in authority.split(',') {
            let (host, port) = broker.rsplit_once(':').ok_or_else(|| {
                fail(format!(
                    "the broker '{broker}' is not HOST:PORT (the port is required); {FORM}"
                ))
            })?;
            if host.is_empty() {
                return Err(fail(format!(
                    "the broker '{broker}' has an empty host; {FORM}"
                )));
            }
            if !port.parse::<u16>().is_ok_and(|p| p > 0) {
                return Err(fail(format!(
                    "the port of '{broker}' is not a number from 1 to 65535; {FORM}"
                )));
            }
            brokers.push(broker.to_owned());
        }
        if path.is_empty() {
            return Err(fail(format!("it names no topic; {FORM}")));
        }
        if path.contains('/') {
            return Err(fail(format!(
                "the path has more than one segment: only the topic follows the brokers; {FORM}"
            )));
        }
        check_topic(path).map_err(fail)?;

        let (mut group, mut offset) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| fail(format!("the parameter '{pair}' has no '=VALUE'; {FORM}")))?;
            let slot = match name {
                "group" => &mut group,
                "offset" => &mut offset,
                _ => return Err(fail(format!("unknown parameter '{name}'; {FORM}"))),
            };
            if slot.replace(value.to_owned()).is_some() {
                return Err(fail(format!("the parameter '{name}' is given twice")));
            }
        }
        let group =
            group.ok_or_else(|| fail(format!("it names no consumer group (?group=G); {FORM}")))?;
        if group.is_empty() || group.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(fail(format!(
                "the group '{group}' is empty or has whitespace"
            )));
        }
        let start = match offset.as_deref() {
            None | Some("earliest") => StartAt::Earliest,
            Some("latest") => StartAt::Latest,
            Some(other) => {
                return Err(fail(format!(
                    "offset={other}: expected offset=earliest (the default) or offset=latest"
                )));
            }
        };
        Ok(KafkaUrl {
            brokers,
            topic: path.to_owned(),
            group,
            start,
        })
    }

    /// The brokers as librdkafka's `bootstrap.servers` takes them.
    pub fn bootstrap(&self) -> String {
        self.brokers.join(",")
    }
}

/// A topic name as Kafka takes it: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub(crate) fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic.len() > 249 {
        return Err(format!(
            "the topic '{topic}' is not 1 to 249 characters long"
        ));
    }
    if topic == "." || topic == ".." {
        return Err(format!("the topic may not be '{topic}'"));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "the topic '{topic}' has {c:?}: a Kafka topic has only letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl fmt::Display for KafkaUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{SCHEME}{}/{}?group={}",
            self.bootstrap(),
            self.topic,
            self.group
        )?;
        if self.start == StartAt::Latest {
            f.write_str("&offset=latest")?;
        }
        Ok(())
    }
}

/// `url` with whatever stands between the scheme and an `@` replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((_, after)) => format!("{scheme}://***@{after}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url_names_brokers_topic_group_and_start() {
        let u = KafkaUrl::parse("kafka://k1:9092,k2:9093/orders.v1?group=rebound&offset=latest")
            .unwrap();
        assert_eq!(u.brokers, ["k1:9092", "k2:9093"]);
        assert_eq!(u.bootstrap(), "k1:9092,k2:9093");
        assert_eq!(u.topic, "orders.v1");
        assert_eq!(u.group, "rebound");
        assert_eq!(u.start, StartAt::Latest);
        assert_eq!(
            u.to_string(),
            "kafka://k1:9092,k2:9093/orders.v1?group=rebound&offset=latest"
        );
        let u = KafkaUrl::parse("kafka://127.0.0.1:9092/orders?group=g").unwrap();
        assert_eq!(
            u.start,
            StartAt::Earliest,
            "a new group reads from the start"
        );
        assert_eq!(u.to_string(), "kafka://127.0.0.1:9092/orders?group=g");
        assert_eq!(
            KafkaUrl::parse(&u.to_string()).unwrap(),
            u,
            "what it shows parses back"
        );
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let why = |url: &str| KafkaUrl::parse(url).unwrap_err().why;
        assert!(why("nats://k:1/t?group=g").contains("does not begin with kafka://"));
        assert!(why("kafka://k:1?group=g").contains("names no topic"));
        assert!(why("kafka://k:1/?group=g").contains("names no topic"));
        assert!(why("kafka://k/t?group=g").contains("is not HOST:PORT"));
        assert!(why("kafka://k:1,:2/t?group=g").contains("empty host"));
        assert!(why("kafka://k:99999/t?group=g").contains("not a number from 1 to 65535"));
        assert!(why("kafka://k:1,k:x/t?group=g").contains("the port of 'k:x'"));
        assert!(why("kafka://k:1/a/b?group=g").contains("more than one segment"));
        assert!(why("kafka://k:1/or ders?group=g").contains("only letters, digits"));
        assert!(why("kafka://k:1/..?group=g").contains("may not be '..'"));
        assert!(why("kafka://k:1/t").contains("names no consumer group"));
        assert!(why("kafka://k:1/t?group=").contains("empty"));
        assert!(why("kafka://k:1/t?group=a&group=b").contains("given twice"));
        assert!(why("kafka://k:1/t?group=g&offset=middle").contains("offset=middle"));
        assert!(why("kafka://k:1/t?group=g&consumer=c").contains("unknown parameter 'consumer'"));
        assert!(why("kafka://k:1/t?group").contains("has no '=VALUE'"));
    }

    #[test]
    fn credentials_are_refused_and_never_shown() {
        let e = KafkaUrl::parse("kafka://app:s3cr%2Ft@k:9092/orders?group=g").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("neither SASL nor TLS"), "{text}");
        assert!(!text.contains("s3cr"), "{text}");
        assert!(!format!("{e:?}").contains("s3cr"));
        assert!(text.contains("kafka://***@k:9092/orders?group=g"), "{text}");
        // A bad URL elsewhere still hides them.
        let e = KafkaUrl::parse("kafka://app:pw@k:9092").unwrap_err();
        assert!(!e.to_string().contains("pw@"), "{e}");
    }
}
