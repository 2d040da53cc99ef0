//! A Kafka record as a runtime [`Message`] (`sources.md`, the Kafka row): id
//! `TOPIC/PARTITION/OFFSET` (the same on every re-read), biz from the header `rebound-biz`,
//! else the default; the record key as the ordering key (so an ordered key and a Kafka
//! partition agree); the value as the payload; every other header as a header. The message's
//! `offset` stays `None`: custody is the partition's mark, not the runtime's position.

use bytes::Bytes;
use rebound_runtime::topology::Message;

/// The header a record's biz comes from (matched without regard to case).
pub const BIZ_HEADER: &str = "rebound-biz";

/// The id of the record at `offset` of `partition` of `topic`.
pub(super) fn id(topic: &str, partition: i32, offset: i64) -> String {
    format!("{topic}/{partition}/{offset}")
}

/// The partition and offset of an id [`id`] made, `prefix` being the length of `TOPIC/`.
pub(super) fn parse_id(id: &str, prefix: usize) -> Option<(i32, i64)> {
    let (partition, offset) = id.get(prefix..)?.split_once('/')?;
    Some((partition.parse().ok()?, offset.parse().ok()?))
}

/// A record's parts, as the reader has them.
pub(super) struct Record<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
    /// Its headers in order, a header without a value as `None`.
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
}

/// The message of `r`; `default_biz` when it has no `rebound-biz` header (or an empty one).
pub(super) fn message(r: &Record<'_>, default_biz: &str) -> Message {
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let mut biz = None;
    let mut rest: Vec<(&str, String)> = Vec::new();
    for &(name, value) in &r.headers {
        let value = value.map(text).unwrap_or_default();
        if name.eq_ignore_ascii_case(BIZ_HEADER) {
            if biz.is_none() && !value.is_empty() {
                biz = Some(value);
            }
            continue;
        }
        match rest.iter_mut().find(|(n, _)| *n == name) {
            // A repeated header, joined as HTTP joins one.
            Some((_, v)) => {
                v.push_str(", ");
                v.push_str(&value);
            }
            None => rest.push((name, value)),
        }
    }
    let biz = biz.unwrap_or_else(|| default_biz.to_owned());
    let payload = Bytes::copy_from_slice(r.payload.unwrap_or_default());
    let mut message = Message::new(id(r.topic, r.partition, r.offset), biz, payload);
    message.key = r.key.filter(|k| !k.is_empty()).map(|k| text(k).into());
    for (name, value) in rest {
        message.headers.insert(name, value);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_maps_to_id_biz_key_payload_and_headers() {
        let r = Record {
            topic: "orders",
            partition: 2,
            offset: 41,
            key: Some(b"order-7"),
            payload: Some(b"{\"amount\":3}"),
            headers: vec![
                ("Rebound-Biz", Some(b"REFUND")),
                ("trace", Some(b"t-1")),
                ("tag", Some(b"a")),
                ("tag", Some(b"b")),
                ("empty", None),
            ],
        };
        let m = message(&r, "DEFAULT");
        assert_eq!(m.id.as_str(), "orders/2/41");
        assert_eq!(parse_id(m.id.as_str(), "orders/".len()), Some((2, 41)));
        assert_eq!(&*m.biz, "REFUND", "the header, whatever its case");
        assert_eq!(m.key.as_ref().map(|k| k.as_str()), Some("order-7"));
        assert_eq!(&m.payload[..], b"{\"amount\":3}");
        assert_eq!(m.headers.get("trace"), Some("t-1"));
        assert_eq!(m.headers.get("tag"), Some("a, b"));
        assert_eq!(m.headers.get("empty"), Some(""));
        assert_eq!(m.headers.get("Rebound-Biz"), None, "taken as the biz");
        assert_eq!(
            m.offset, None,
            "custody is the mark, not the runtime's position"
        );

        let bare = Record {
            topic: "orders",
            partition: 0,
            offset: 0,
            key: Some(b""),
            payload: None,
            headers: vec![("rebound-biz", Some(b""))],
        };
        let m = message(&bare, "DEFAULT");
        assert_eq!(&*m.biz, "DEFAULT", "an empty header is no biz");
        assert_eq!(m.key, None, "an empty key is no key");
        assert!(m.payload.is_empty() && m.headers.is_empty());
        assert_eq!(parse_id("orders/x/1", 7), None);
        assert_eq!(parse_id("orders/1", 7), None);
    }
}
