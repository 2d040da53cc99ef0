//! A stream entry as a [`Message`]: `STREAM/ENTRY-ID` its id, three fields its biz, key and
//! payload, every other field a header.

use rebound_runtime::topology::{Key, Message};
use redis::Value;
use redis::streams::StreamId;

/// The entry fields a message's biz, ordering key and payload come from (`source.fields`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldNames {
    /// The business type (default `biz`).
    pub biz: String,
    /// The ordering key (default `key`).
    pub key: String,
    /// The payload (default `payload`).
    pub payload: String,
}

impl Default for FieldNames {
    fn default() -> Self {
        FieldNames {
            biz: "biz".into(),
            key: "key".into(),
            payload: "payload".into(),
        }
    }
}

/// The bytes of a field's value (a bulk string; anything else as Redis would print it).
fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        Value::Int(i) => i.to_string().into_bytes(),
        other => format!("{other:?}").into_bytes(),
    }
}

/// The message of `entry` of `stream`.
pub(super) fn message(
    stream: &str,
    entry: &StreamId,
    names: &FieldNames,
    default_biz: &str,
) -> Message {
    let text = |name: &str| {
        entry
            .map
            .get(name)
            .map(|v| String::from_utf8_lossy(&bytes(v)).into_owned())
    };
    let biz = text(&names.biz).unwrap_or_else(|| default_biz.to_owned());
    let payload = entry.map.get(&names.payload).map(bytes).unwrap_or_default();
    let mut message = Message::new(format!("{stream}/{}", entry.id), biz, payload);
    message.key = text(&names.key).map(Key::from);
    let mut fields: Vec<_> = entry.map.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    for (name, value) in fields {
        if *name != names.biz && *name != names.key && *name != names.payload {
            message = message.with_header(name.clone(), String::from_utf8_lossy(&bytes(value)));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn fields_become_the_message_s_parts_and_headers() {
        let map: HashMap<String, Value> = [
            ("biz", "PAYMENT"),
            ("key", "order-7"),
            ("payload", "{\"amount\":3}"),
            ("trace", "t-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::BulkString(v.as_bytes().to_vec())))
        .collect();
        let entry = StreamId {
            id: "1700000000000-0".into(),
            map,
            ..Default::default()
        };
        let m = message("orders", &entry, &FieldNames::default(), "DEFAULT");
        assert_eq!(m.id.as_str(), "orders/1700000000000-0");
        assert_eq!(&*m.biz, "PAYMENT");
        assert_eq!(m.key.as_ref().map(|k| k.as_str()), Some("order-7"));
        assert_eq!(&m.payload[..], b"{\"amount\":3}");
        assert_eq!(m.headers.get("trace"), Some("t-1"));
        assert_eq!(m.headers.get("biz"), None);
        let bare = StreamId {
            id: "1-0".into(),
            ..Default::default()
        };
        assert_eq!(
            &*message("s", &bare, &FieldNames::default(), "DEFAULT").biz,
            "DEFAULT"
        );
    }
}
