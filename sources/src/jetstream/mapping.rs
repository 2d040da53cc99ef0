//! A JetStream message as a runtime [`Message`] (`sources.md`, the JetStream row): id
//! `STREAM/SEQ` (the stream sequence, the same on every redelivery), biz from the header
//! `Rebound-Biz`, else a token of the subject, else the default; key from the header
//! `Rebound-Key`, else `Nats-Msg-Id`; the body as the payload; every other header as a header.

use std::num::NonZeroUsize;

use async_nats::HeaderMap;
use bytes::Bytes;
use rebound_runtime::topology::Message;

/// The header a message's biz comes from (matched without regard to case).
pub const BIZ_HEADER: &str = "Rebound-Biz";
/// The header a message's ordering key comes from (matched without regard to case).
pub const KEY_HEADER: &str = "Rebound-Key";
/// The key of a message without [`KEY_HEADER`]: its publisher's de-duplication id.
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// How a message's biz is found when it has no `Rebound-Biz` header.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mapping<'a> {
    /// The stream, the first part of every id.
    pub stream: &'a str,
    /// The subject's token (1-based) that names the biz (`source.biz_token`).
    pub biz_token: Option<NonZeroUsize>,
    /// The biz when neither the header nor the token gives one.
    pub default_biz: &'a str,
}

/// The id of the message at `seq` of `stream`.
pub(super) fn id(stream: &str, seq: u64) -> String {
    format!("{stream}/{seq}")
}

/// A header's values, joined as HTTP joins a repeated header.
fn value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(n, _)| AsRef::<str>::as_ref(*n).eq_ignore_ascii_case(name))
        .map(|(_, values)| join(values))
}

fn join(values: &[async_nats::HeaderValue]) -> String {
    values
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The message published on `subject`, at `seq` of the stream, with `headers` and `payload`.
pub(super) fn message(
    m: Mapping<'_>,
    seq: u64,
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: Bytes,
) -> Message {
    let header = |name: &str| {
        headers
            .and_then(|h| value(h, name))
            .filter(|v| !v.is_empty())
    };
    let biz = header(BIZ_HEADER)
        .or_else(|| {
            let token = m.biz_token?.get();
            subject
                .split('.')
                .nth(token - 1)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| m.default_biz.to_owned());
    let mut message = Message::new(id(m.stream, seq), biz, payload);
    message.key = header(KEY_HEADER)
        .or_else(|| header(MSG_ID_HEADER))
        .map(Into::into);
    if let Some(headers) = headers {
        let mut rest: Vec<(&str, String)> = headers
            .iter()
            .map(|(n, values)| (AsRef::<str>::as_ref(n), join(values)))
            .filter(|(n, _)| {
                !n.eq_ignore_ascii_case(BIZ_HEADER) && !n.eq_ignore_ascii_case(KEY_HEADER)
            })
            .collect();
        rest.sort();
        for (name, value) in rest {
            message.headers.insert(name, value);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(biz_token: usize) -> Mapping<'static> {
        Mapping {
            stream: "ORDERS",
            biz_token: NonZeroUsize::new(biz_token),
            default_biz: "DEFAULT",
        }
    }

    #[test]
    fn headers_come_first_then_the_subject_token_then_the_default() {
        let mut h = HeaderMap::new();
        h.insert("Rebound-Biz", "REFUND");
        h.insert("Rebound-Key", "order-7");
        h.insert("Nats-Msg-Id", "m-1");
        h.insert("trace", "t-1");
        h.append("tag", "a");
        h.append("tag", "b");
        let m = message(
            mapping(2),
            42,
            "orders.PAYMENT",
            Some(&h),
            Bytes::from_static(b"{\"amount\":3}"),
        );
        assert_eq!(m.id.as_str(), "ORDERS/42");
        assert_eq!(&*m.biz, "REFUND");
        assert_eq!(m.key.as_ref().map(|k| k.as_str()), Some("order-7"));
        assert_eq!(&m.payload[..], b"{\"amount\":3}");
        assert_eq!(m.headers.get("trace"), Some("t-1"));
        assert_eq!(m.headers.get("tag"), Some("a, b"));
        assert_eq!(m.headers.get("Nats-Msg-Id"), Some("m-1"));
        assert_eq!(m.headers.get("Rebound-Biz"), None, "taken as the biz");
        assert_eq!(m.headers.get("Rebound-Key"), None, "taken as the key");
        assert_eq!(m.offset, None);
        assert_eq!(m.retry, Default::default());

        // No biz header: the subject's second token; no key header: Nats-Msg-Id.
        let mut h = HeaderMap::new();
        h.insert("Nats-Msg-Id", "m-2");
        let m = message(mapping(2), 43, "orders.PAYMENT", Some(&h), Bytes::new());
        assert_eq!(
            (&*m.biz, m.key.as_ref().map(|k| k.as_str())),
            ("PAYMENT", Some("m-2"))
        );

        // A token past the subject's end, or none asked for: the default; no headers at all.
        let m = message(mapping(3), 44, "orders.PAYMENT", None, Bytes::new());
        assert_eq!((&*m.biz, m.key.as_ref()), ("DEFAULT", None));
        assert!(m.headers.is_empty());
        let m = message(mapping(0), 45, "orders.PAYMENT", None, Bytes::new());
        assert_eq!(&*m.biz, "DEFAULT");
        let m = message(mapping(1), 46, "orders.PAYMENT", None, Bytes::new());
        assert_eq!(&*m.biz, "orders");
    }

    #[test]
    fn header_names_match_without_regard_to_case_and_an_empty_one_is_no_value() {
        let mut h = HeaderMap::new();
        h.insert("rebound-biz", "PAYMENT");
        h.insert("REBOUND-KEY", "");
        h.insert("nats-msg-id", "m-3");
        let m = message(mapping(0), 1, "orders", Some(&h), Bytes::new());
        assert_eq!(&*m.biz, "PAYMENT");
        assert_eq!(m.key.as_ref().map(|k| k.as_str()), Some("m-3"));
        assert_eq!(m.headers.get("rebound-biz"), None);
        assert_eq!(m.headers.get("REBOUND-KEY"), None);
    }
}
