//! The source's URL, `nats://[USER:PASS@]HOST:PORT/STREAM?consumer=NAME[&subject=FILTER]
//! [&deliver=all|new]` (`sources.md`), and what it names.

use std::fmt;

pub use crate::url_text::decode;
use crate::url_text::redact;

/// Where a durable consumer created now starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deliver {
    /// From the start of what the stream holds (`deliver=all`, the default): a new deployment
    /// never skips messages already waiting.
    All,
    /// Only messages published after the consumer is created (`deliver=new`).
    New,
}

/// A parsed `nats://` source URL. Its password is kept out of sight: [`fmt::Display`] and
/// [`fmt::Debug`] show `***` in its place.
#[derive(Clone, PartialEq, Eq)]
pub struct JetStreamUrl {
    /// The server, `HOST:PORT`.
    pub server: String,
    /// The user, when the URL names one.
    pub user: Option<String>,
    password: Option<String>,
    /// The stream.
    pub stream: String,
    /// The durable consumer's name.
    pub consumer: String,
    /// The subject filter of a consumer created now (`subject=orders.>`), if any.
    pub subject: Option<String>,
    /// Where a consumer created now starts.
    pub deliver: Deliver,
}

/// Why a `nats://` URL was refused (it never repeats a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad source URL {shown}: {why}")]
pub struct JetStreamUrlError {
    /// The URL with its password hidden.
    pub shown: String,
    /// What is wrong, and what is expected.
    pub why: String,
}

const SCHEME: &str = "nats://";
const FORM: &str =
    "expected nats://[USER:PASS@]HOST:PORT/STREAM?consumer=NAME[&subject=FILTER][&deliver=all|new]";

impl JetStreamUrl {
    /// Parses `url`. User and password are percent-decoded (write `@`, `/`, `:` and `?` in
    /// them as `%40`, `%2F`, `%3A` and `%3F`), and so are the query's values.
    pub fn parse(url: &str) -> Result<JetStreamUrl, JetStreamUrlError> {
        let fail = |why: String| JetStreamUrlError {
            shown: redact(url),
            why,
        };
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| fail(format!("it does not begin with {SCHEME}; {FORM}")))?;
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = before_query
            .split_once('/')
            .ok_or_else(|| fail(format!("it names no stream; {FORM}")))?;
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
                    fail(format!(
                        "the user-info before '@' is not USER:PASS (a token alone is not taken); {FORM}"
                    ))
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
        if !port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err(fail(format!(
                "the port is not a number from 1 to 65535; {FORM}"
            )));
        }
        if path.is_empty() {
            return Err(fail(format!("it names no stream; {FORM}")));
        }
        if path.contains('/') {
            return Err(fail(format!(
                "the path has more than one segment: only the stream follows HOST:PORT; {FORM}"
            )));
        }
        let stream = decode(path).map_err(|why| fail(format!("the stream {why}")))?;
        check_name("stream", &stream).map_err(fail)?;

        let (mut consumer, mut subject, mut deliver) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| fail(format!("the parameter '{pair}' has no '=VALUE'; {FORM}")))?;
            let value =
                decode(value).map_err(|why| fail(format!("the value of '{name}' {why}")))?;
            let slot = match name {
                "consumer" => &mut consumer,
                "subject" => &mut subject,
                "deliver" => &mut deliver,
                _ => return Err(fail(format!("unknown parameter '{name}'; {FORM}"))),
            };
            if slot.replace(value).is_some() {
                return Err(fail(format!("the parameter '{name}' is given twice")));
            }
        }
        let consumer = consumer
            .ok_or_else(|| fail(format!("it names no consumer (?consumer=NAME); {FORM}")))?;
        check_name("consumer", &consumer).map_err(fail)?;
        if let Some(subject) = &subject {
            check_subject(subject).map_err(fail)?;
        }
        let deliver = match deliver.as_deref() {
            None | Some("all") => Deliver::All,
            Some("new") => Deliver::New,
            Some(other) => {
                return Err(fail(format!(
                    "deliver={other}: expected deliver=all (the default) or deliver=new"
                )));
            }
        };
        Ok(JetStreamUrl {
            server: host_port.to_owned(),
            user,
            password,
            stream,
            consumer,
            subject,
            deliver,
        })
    }

    /// The user and password, for the connection only.
    pub(crate) fn credentials(&self) -> Option<(String, String)> {
        Some((self.user.clone()?, self.password.clone()?))
    }
}

/// A stream's or a consumer's name as the server takes it: not empty, no whitespace, no `.`,
/// `*`, `>`, `/` or `\`, nothing unprintable.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("the {what} name is empty"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
    {
        return Err(format!(
            "the {what} name '{name}' has {c:?}, which a JetStream name may not have \
             (whitespace, '.', '*', '>', '/', '\\')"
        ));
    }
    Ok(())
}

/// A subject filter: dot-separated tokens, none empty, `*` a whole token and `>` only the last.
fn check_subject(subject: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("the subject filter '{subject}' {why}"));
    if subject.is_empty() {
        return bad("is empty");
    }
    if subject.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("has whitespace");
    }
    let tokens: Vec<&str> = subject.split('.').collect();
    for (i, token) in tokens.iter().enumerate() {
        if token.is_empty() {
            return bad("has an empty token (two dots, or a dot at an end)");
        }
        if token.len() > 1 && (token.contains('*') || token.contains('>')) {
            return bad("has '*' or '>' inside a token (a wildcard is a whole token)");
        }
        if *token == ">" && i + 1 != tokens.len() {
            return bad("has '>' before its last token");
        }
    }
    Ok(())
}

/// The URL without its password, as logs and errors show it.
impl fmt::Debug for JetStreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for JetStreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SCHEME)?;
        if let Some(user) = &self.user {
            write!(f, "{user}:***@")?;
        }
        write!(
            f,
            "{}/{}?consumer={}",
            self.server, self.stream, self.consumer
        )?;
        if let Some(subject) = &self.subject {
            write!(f, "&subject={subject}")?;
        }
        if self.deliver == Deliver::New {
            f.write_str("&deliver=new")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_of_sources_md_parse() {
        let u = JetStreamUrl::parse("nats://127.0.0.1:4222/ORDERS?consumer=rebound").unwrap();
        assert_eq!(u.server, "127.0.0.1:4222");
        assert_eq!(
            (u.stream.as_str(), u.consumer.as_str()),
            ("ORDERS", "rebound")
        );
        assert_eq!((u.subject.as_deref(), u.deliver), (None, Deliver::All));
        assert_eq!(u.credentials(), None);
        assert_eq!(
            u.to_string(),
            "nats://127.0.0.1:4222/ORDERS?consumer=rebound"
        );

        let u = JetStreamUrl::parse(
            "nats://app:s3cret@nats.internal:4222/ORDERS?consumer=r&subject=orders.%3E&deliver=new",
        )
        .unwrap();
        assert_eq!(u.server, "nats.internal:4222");
        assert_eq!(u.credentials(), Some(("app".into(), "s3cret".into())));
        assert_eq!(u.subject.as_deref(), Some("orders.>"));
        assert_eq!(u.deliver, Deliver::New);
        assert_eq!(
            u.to_string(),
            "nats://app:***@nats.internal:4222/ORDERS?consumer=r&subject=orders.>&deliver=new"
        );
        assert!(!format!("{u:?}").contains("s3cret"));

        // Percent-encoded user-info; a raw '@' in the password is taken up to the last '@';
        // a raw wildcard in the query; deliver=all said out loud; IPv6.
        let u =
            JetStreamUrl::parse("nats://a%40b:p%2Fw@h:1/S?subject=orders.*&consumer=c&deliver=all")
                .unwrap();
        assert_eq!(u.credentials(), Some(("a@b".into(), "p/w".into())));
        assert_eq!(u.subject.as_deref(), Some("orders.*"));
        let u = JetStreamUrl::parse("nats://u:p@ss@h:1/S?consumer=c").unwrap();
        assert_eq!(u.credentials(), Some(("u".into(), "p@ss".into())));
        assert_eq!(u.server, "h:1");
        let u = JetStreamUrl::parse("nats://[::1]:4222/S?consumer=c").unwrap();
        assert_eq!(u.server, "[::1]:4222");
    }

    #[test]
    fn a_bad_url_says_what_is_wrong_and_never_shows_the_password() {
        for (url, says) in [
            (
                "redis-stream://h:1/S?consumer=c",
                "does not begin with nats://",
            ),
            ("nats://u:pw@h:1/S", "names no consumer"),
            ("nats://u:pw@h:1/S?consumer=", "consumer name is empty"),
            ("nats://u:pw@h:1?consumer=c", "names no stream"),
            ("nats://u:pw@h:1/?consumer=c", "names no stream"),
            ("nats://u:pw@h:1/a/b?consumer=c", "more than one segment"),
            ("nats://u:pw@h/S?consumer=c", "HOST:PORT"),
            (
                "nats://u:pw@:4222/S?consumer=c",
                "host before the port is empty",
            ),
            ("nats://u:pw@h:x/S?consumer=c", "port is not a number"),
            ("nats://u:pw@h:0/S?consumer=c", "port is not a number"),
            ("nats://u:pw@h:70000/S?consumer=c", "port is not a number"),
            ("nats://pw@h:1/S?consumer=c", "not USER:PASS"),
            ("nats://:pw@h:1/S?consumer=c", "user before ':' is empty"),
            ("nats://u:p%zw@h:1/S?consumer=c", "the password has a '%'"),
            ("nats://u:pw@h:1/S?consumer=c&deliver=last", "deliver=last"),
            (
                "nats://u:pw@h:1/S?consumer=c&batch=7",
                "unknown parameter 'batch'",
            ),
            (
                "nats://u:pw@h:1/S?consumer=c&consumer=d",
                "'consumer' is given twice",
            ),
            ("nats://u:pw@h:1/S?consumer", "'consumer' has no '=VALUE'"),
            (
                "nats://u:pw@h:1/OR.DERS?consumer=c",
                "stream name 'OR.DERS'",
            ),
            ("nats://u:pw@h:1/S?consumer=a*b", "consumer name 'a*b'"),
            (
                "nats://u:pw@h:1/S?consumer=c&subject=orders..x",
                "empty token",
            ),
            (
                "nats://u:pw@h:1/S?consumer=c&subject=orders.>.x",
                "'>' before its last",
            ),
            (
                "nats://u:pw@h:1/S?consumer=c&subject=ord*",
                "inside a token",
            ),
            // A raw '/' in the password cuts the authority there: still hidden.
            ("nats://u:p/w@h:1/S?consumer=c", ""),
        ] {
            let e = JetStreamUrl::parse(url).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("pw"), "{url}: {text}");
            assert!(!text.contains("p/w"), "{url}: {text}");
        }
    }

    #[test]
    fn redaction_hides_what_could_be_a_secret() {
        assert_eq!(redact("nats://u:pw@h:1/S"), "nats://u:***@h:1/S");
        assert_eq!(redact("nats://tok@h:1/S"), "nats://***@h:1/S");
        assert_eq!(redact("nats://u:p/w@h:1/S"), "nats://u:***@h:1/S");
        assert_eq!(redact("nats://h:1/S"), "nats://h:1/S");
        assert_eq!(redact("no scheme"), "no scheme");
    }
}
