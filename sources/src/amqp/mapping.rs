//! A RabbitMQ delivery as a runtime [`Message`] (`sources.md`, the RabbitMQ row): id the
//! `message-id` property (the same on every redelivery), biz from the header `rebound-biz`,
//! else the routing key, else the default; key from the header `rebound-key`; the body as the
//! payload; every other header as a header (its value as text).
//!
//! A delivery without a `message-id` has no stable id (a delivery tag counts deliveries on one
//! channel): it gets the id `QUEUE/no-message-id/RUN-CHANNEL-TAG`, unique in this process
//! (the source's start time, the channel's number since then and the delivery tag), and is
//! refused at once (dead-lettered, code [`NO_MESSAGE_ID`], never delivered). That its id is not
//! stable costs little: it is never retried, so nothing is looked up by it; only if its
//! `basic.ack` is lost (the broker dies between the letter's store and the ack) does the
//! broker deliver it again, and it becomes a second dead letter of the same payload.

use bytes::Bytes;
use lapin::types::{AMQPValue, FieldTable};
use rebound_runtime::topology::Message;

/// The header a message's biz comes from (matched without regard to case).
pub const BIZ_HEADER: &str = "rebound-biz";
/// The header a message's ordering key comes from (matched without regard to case).
pub const KEY_HEADER: &str = "rebound-key";
/// The failure code of a message without a `message-id` property.
pub const NO_MESSAGE_ID: &str = "NO_MESSAGE_ID";

/// What a delivery's id and biz are made of besides the delivery.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mapping<'a> {
    /// The queue (the first part of an id-less message's id).
    pub queue: &'a str,
    /// The biz when neither the header nor the routing key gives one.
    pub default_biz: &'a str,
    /// When this source started, in milliseconds since the epoch (id-less messages' ids).
    pub run: u64,
}

/// A delivery's message, and whether it had a `message-id` (one without is to be refused).
pub(super) fn message(
    m: Mapping<'_>,
    channel: u64,
    tag: u64,
    routing_key: &str,
    message_id: Option<&str>,
    headers: Option<&FieldTable>,
    payload: Bytes,
) -> (Message, bool) {
    let header = |name: &str| {
        headers
            .and_then(|h| {
                h.inner()
                    .iter()
                    .find(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
            })
            .map(|(_, v)| text(v))
            .filter(|v| !v.is_empty())
    };
    let biz = header(BIZ_HEADER)
        .or_else(|| (!routing_key.is_empty()).then(|| routing_key.to_owned()))
        .unwrap_or_else(|| m.default_biz.to_owned());
    let id = message_id.filter(|id| !id.is_empty());
    let has_id = id.is_some();
    let id = match id {
        Some(id) => id.to_owned(),
        None => format!("{}/no-message-id/{}-{channel}-{tag}", m.queue, m.run),
    };
    let mut message = Message::new(id, biz, payload);
    message.key = header(KEY_HEADER).map(Into::into);
    if let Some(headers) = headers {
        for (name, value) in headers.inner() {
            let name = name.as_str();
            if name.eq_ignore_ascii_case(BIZ_HEADER) || name.eq_ignore_ascii_case(KEY_HEADER) {
                continue;
            }
            message.headers.insert(name, text(value));
        }
    }
    (message, has_id)
}

/// A header's value as text: strings as they are (bytes read as UTF-8, lossily), numbers and
/// booleans as written, an array's items joined with `, ` as HTTP joins a repeated header,
/// anything else as its debug form.
fn text(value: &AMQPValue) -> String {
    match value {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::ByteArray(b) => String::from_utf8_lossy(b.as_slice()).into_owned(),
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Float(n) => n.to_string(),
        AMQPValue::Double(n) => n.to_string(),
        AMQPValue::Timestamp(n) => n.to_string(),
        AMQPValue::FieldArray(a) => a.as_slice().iter().map(text).collect::<Vec<_>>().join(", "),
        AMQPValue::Void => String::new(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};

    const M: Mapping<'static> = Mapping {
        queue: "orders",
        default_biz: "DEFAULT",
        run: 1700,
    };

    fn table(pairs: &[(&str, AMQPValue)]) -> FieldTable {
        let mut t = FieldTable::default();
        for (n, v) in pairs {
            t.insert((*n).into(), v.clone());
        }
        t
    }

    fn s(v: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(v.as_bytes().to_vec()))
    }

    #[test]
    fn the_header_then_the_routing_key_then_the_default_name_the_biz() {
        let h = table(&[
            ("Rebound-Biz", s("REFUND")),
            ("rebound-key", s("order-7")),
            ("trace", s("t-1")),
            ("tries", AMQPValue::LongInt(3)),
            (
                "tags",
                AMQPValue::FieldArray(FieldArray::from(vec![s("a"), s("b")])),
            ),
        ]);
        let (m, has_id) = message(
            M,
            1,
            42,
            "PAYMENT",
            Some("m-1"),
            Some(&h),
            Bytes::from_static(b"{\"amount\":3}"),
        );
        assert!(has_id);
        assert_eq!(m.id.as_str(), "m-1");
        assert_eq!(&*m.biz, "REFUND");
        assert_eq!(m.key.as_ref().map(|k| k.as_str()), Some("order-7"));
        assert_eq!(&m.payload[..], b"{\"amount\":3}");
        assert_eq!(m.headers.get("trace"), Some("t-1"));
        assert_eq!(m.headers.get("tries"), Some("3"));
        assert_eq!(m.headers.get("tags"), Some("a, b"));
        assert_eq!(m.headers.get("Rebound-Biz"), None, "taken as the biz");
        assert_eq!(m.headers.get("rebound-key"), None, "taken as the key");

        let (m, _) = message(M, 1, 43, "PAYMENT", Some("m-2"), None, Bytes::new());
        assert_eq!((&*m.biz, m.key.as_ref()), ("PAYMENT", None));
        let (m, _) = message(M, 1, 44, "", Some("m-3"), None, Bytes::new());
        assert_eq!(&*m.biz, "DEFAULT");
        // An empty header is no value.
        let h = table(&[("rebound-biz", s(""))]);
        let (m, _) = message(M, 1, 45, "PAYMENT", Some("m-4"), Some(&h), Bytes::new());
        assert_eq!(&*m.biz, "PAYMENT");
    }

    #[test]
    fn a_delivery_without_a_message_id_gets_an_id_unique_in_the_run() {
        let (a, has_id) = message(M, 1, 7, "PAYMENT", None, None, Bytes::new());
        assert!(!has_id);
        assert_eq!(a.id.as_str(), "orders/no-message-id/1700-1-7");
        let (b, has_id) = message(M, 2, 7, "PAYMENT", Some(""), None, Bytes::new());
        assert!(!has_id, "an empty message-id is none");
        assert_ne!(a.id, b.id, "the same tag on another channel is another id");
    }
}
