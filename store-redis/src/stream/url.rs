//! The source's URL, `redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM?group=G[&start=0|$]`
//! (`sources.md`), and what it names.

use std::fmt;

/// Where a new consumer group starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStart {
    /// From the start of what the stream holds (`start=0`, the default): a new deployment
    /// never skips messages already waiting.
    Beginning,
    /// Only entries added after the group is created (`start=$`).
    New,
}

/// A parsed `redis-stream://` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct StreamUrl {
    /// The server, as redis-rs takes it (`redis://[USER:PASS@]HOST:PORT[/DB]`).
    pub server: String,
    /// The stream's key.
    pub stream: String,
    /// The consumer group.
    pub group: String,
    /// Where a group created now starts.
    pub start: StreamStart,
}

/// Why a `redis-stream://` URL was refused (it never repeats a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad source URL {shown}: {why}")]
pub struct StreamUrlError {
    /// The URL with its password hidden.
    pub shown: String,
    /// What is wrong, and what is expected.
    pub why: String,
}

const SCHEME: &str = "redis-stream://";
const FORM: &str = "expected redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM?group=G[&start=0|$]";

impl StreamUrl {
    /// Parses `url`.
    pub fn parse(url: &str) -> Result<StreamUrl, StreamUrlError> {
        let fail = |why: String| StreamUrlError {
            shown: redact(url),
            why,
        };
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| fail(format!("it does not begin with {SCHEME}; {FORM}")))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = path
            .split_once('/')
            .ok_or_else(|| fail(format!("it names no stream; {FORM}")))?;
        if authority.is_empty()
            || !authority
                .rsplit('@')
                .next()
                .is_some_and(|h| h.contains(':'))
        {
            return Err(fail(format!("it names no HOST:PORT; {FORM}")));
        }
        let segments: Vec<&str> = path.split('/').collect();
        let (db, stream) = match segments[..] {
            [stream] => (None, stream),
            [db, stream] => {
                let db: u32 = db
                    .parse()
                    .map_err(|_| fail(format!("'{db}' is not a database number; {FORM}")))?;
                (Some(db), stream)
            }
            _ => return Err(fail(format!("too many path segments; {FORM}"))),
        };
        if stream.is_empty() {
            return Err(fail(format!("it names no stream; {FORM}")));
        }
        let (mut group, mut start) = (None, StreamStart::Beginning);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("group", g)) if !g.is_empty() => group = Some(g.to_owned()),
                Some(("start", "0")) => start = StreamStart::Beginning,
                Some(("start", "$")) | Some(("start", "%24")) => start = StreamStart::New,
                Some(("start", other)) => {
                    return Err(fail(format!("start={other}: expected start=0 or start=$")));
                }
                _ => return Err(fail(format!("unknown parameter '{pair}'; {FORM}"))),
            }
        }
        let group = group.ok_or_else(|| fail(format!("it names no group (?group=G); {FORM}")))?;
        let server = match db {
            Some(db) => format!("redis://{authority}/{db}"),
            None => format!("redis://{authority}"),
        };
        Ok(StreamUrl {
            server,
            stream: stream.to_owned(),
            group,
            start,
        })
    }

    /// The id XGROUP CREATE takes for [`StreamUrl::start`].
    pub(crate) fn start_id(&self) -> &'static str {
        match self.start {
            StreamStart::Beginning => "0",
            StreamStart::New => "$",
        }
    }
}

/// The URL without its password, as logs and errors show it.
impl fmt::Debug for StreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for StreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let server = redact(&self.server);
        let server = server.strip_prefix("redis://").unwrap_or(&server);
        write!(f, "{SCHEME}{server}/{}?group={}", self.stream, self.group)
    }
}

/// `url` with the password of its user-info replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split_once(':').map_or(user_info, |(u, _)| u);
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_of_sources_md_parse() {
        let u = StreamUrl::parse("redis-stream://127.0.0.1:6379/orders?group=rebound").unwrap();
        assert_eq!(u.server, "redis://127.0.0.1:6379");
        assert_eq!((u.stream.as_str(), u.group.as_str()), ("orders", "rebound"));
        assert_eq!(u.start, StreamStart::Beginning);
        let u = StreamUrl::parse("redis-stream://app:s3cret@h:1/2/orders?group=g&start=$").unwrap();
        assert_eq!(u.server, "redis://app:s3cret@h:1/2");
        assert_eq!(u.start, StreamStart::New);
        assert_eq!(u.to_string(), "redis-stream://app:***@h:1/2/orders?group=g");
        assert!(!format!("{u:?}").contains("s3cret"));
    }

    #[test]
    fn a_bad_url_says_what_is_wrong_and_never_shows_the_password() {
        for (url, says) in [
            ("redis://h:1/orders?group=g", "does not begin with"),
            ("redis-stream://h:1/orders", "names no group"),
            ("redis-stream://h:1/?group=g", "names no stream"),
            ("redis-stream://h/orders?group=g", "HOST:PORT"),
            (
                "redis-stream://h:1/x/orders?group=g",
                "not a database number",
            ),
            ("redis-stream://u:pw@h:1/orders?group=g&start=7", "start=7"),
            (
                "redis-stream://u:pw@h:1/orders?group=g&batch=7",
                "unknown parameter",
            ),
        ] {
            let e = StreamUrl::parse(url).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("pw@"), "{url}: {text}");
        }
    }
}
