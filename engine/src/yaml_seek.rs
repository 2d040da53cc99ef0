//! Where serde_yaml itself puts a node of a file: the fallback for when the pass over
//! saphyr-parser's events stopped short (the two parsers disagree about some input), so that
//! a value the model holds is still located.
//!
//! serde_yaml tells positions only in errors, and it fills in the position of the node whose
//! visitor failed. So a seek deserialises the file along a dotted path, skipping everything
//! else, and fails on purpose at the node it is looking for. One seek parses the whole file;
//! callers use it only where the event pass gave out.

use crate::diag::Pos;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// What the deliberate error says; no error of the file itself contains it.
const FOUND: &str = "\u{0}rebound seek: found";

/// Where the value at `path` (`rules.3.if`, `""` for the root) starts, or with `key`, the key
/// of that entry, as serde_yaml reads `text`.
pub(crate) fn seek(text: &str, path: &str, key: bool) -> Option<Pos> {
    let seek = Seek { rest: path, key };
    let outcome = if path.is_empty() {
        Found.deserialize(serde_yaml::Deserializer::from_str(text))
    } else {
        seek.deserialize(serde_yaml::Deserializer::from_str(text))
    };
    found_at(outcome.err()?)
}

/// Where the second document of `text` starts, as serde_yaml reads it: its first node, or the
/// place where the parser found something after the first document that starts none.
pub(crate) fn second_document(text: &str) -> Option<Pos> {
    let mut documents = serde_yaml::Deserializer::from_str(text);
    IgnoredAny::deserialize(documents.next()?).ok()?;
    let err = Found.deserialize(documents.next()?).err()?;
    let at = err.location()?;
    Some(Pos::new(at.line(), at.column()))
}

fn found_at(err: serde_yaml::Error) -> Option<Pos> {
    if !err.to_string().contains(FOUND) {
        return None;
    }
    let at = err.location()?;
    Some(Pos::new(at.line(), at.column()))
}

/// Fails at whatever node it is given. Every visit that a visitor does not implement fails
/// with "invalid type: ..., expected" and then this visitor's `expecting`, which says FOUND.
struct Found;

impl<'de> DeserializeSeed<'de> for Found {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Found {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(FOUND)
    }
}

/// Walks down `rest` of a path, failing at its end.
struct Seek<'p> {
    rest: &'p str,
    key: bool,
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping or a sequence")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let wanted = (self.key).then_some(self.rest);
        while let Some(key) = map.next_key_seed(KeyText { wanted })? {
            if key == self.rest {
                return map.next_value_seed(Found);
            }
            // A key may hold dots itself (an attribute name): match it whole.
            if let Some(tail) = self
                .rest
                .strip_prefix(key.as_str())
                .and_then(|t| t.strip_prefix('.'))
            {
                return map.next_value_seed(Seek {
                    rest: tail,
                    key: self.key,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (index, tail) = self.rest.split_once('.').unwrap_or((self.rest, ""));
        let Ok(index) = index.parse::<usize>() else {
            return Ok(());
        };
        for _ in 0..index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        match (tail.is_empty(), self.key) {
            // An element of a sequence has no key.
            (true, true) => Ok(()),
            (true, false) => seq.next_element_seed(Found).map(drop),
            (false, _) => seq
                .next_element_seed(Seek {
                    rest: tail,
                    key: self.key,
                })
                .map(drop),
        }
    }
}

/// A mapping key as text (as the event pass spells paths), failing at the key `wanted`.
struct KeyText<'p> {
    wanted: Option<&'p str>,
}

impl<'de> DeserializeSeed<'de> for KeyText<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl KeyText<'_> {
    fn text<E: de::Error>(&self, key: String) -> Result<String, E> {
        if self.wanted == Some(key.as_str()) {
            return Err(E::custom(FOUND));
        }
        Ok(key)
    }
}

impl Visitor<'_> for KeyText<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scalar key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.text(v.to_owned())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        self.text(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        self.text(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        self.text(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        self.text(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seek_finds_keys_and_values_where_serde_yaml_reads_them() {
        let text = "version: 1\nrules:\n  - id: a\n    if: 'x > 1'\n  - id: b\n    \
                    match: { code: [A, B], attrs: { a.b: X } }\n";
        assert_eq!(seek(text, "", false), Some(Pos::new(1, 1)));
        assert_eq!(seek(text, "version", false), Some(Pos::new(1, 10)));
        assert_eq!(seek(text, "rules.0.if", true), Some(Pos::new(4, 5)));
        assert_eq!(seek(text, "rules.0.if", false), Some(Pos::new(4, 9)));
        assert_eq!(seek(text, "rules.1", false), Some(Pos::new(5, 5)));
        assert_eq!(
            seek(text, "rules.1.match.code.1", false),
            Some(Pos::new(6, 24))
        );
        assert_eq!(
            seek(text, "rules.1.match.attrs.a.b", false),
            Some(Pos::new(6, 42))
        );
        // Not there, and not a key.
        assert_eq!(seek(text, "rules.2.id", false), None);
        assert_eq!(seek(text, "rules.0", true), None);
        assert_eq!(seek(text, "defaults", false), None);
    }

    #[test]
    fn a_seek_reads_a_byte_order_mark_as_libyaml_does() {
        let text = "version: 1\n# a\u{feff}b\nrules:\n  - id: s\u{feff}t\n    retry: 3\n";
        assert_eq!(seek(text, "rules.0.retry", false), Some(Pos::new(5, 12)));
    }

    #[test]
    fn the_second_document_is_where_libyaml_finds_it() {
        assert_eq!(
            second_document("version: 1\n---\nrules: []\n"),
            Some(Pos::new(3, 1))
        );
        // The mark indents line 2 by one column: line 3 starts another document.
        assert_eq!(
            second_document("# c\n\u{feff}version: 1\nrules: []\n"),
            Some(Pos::new(3, 1))
        );
        assert_eq!(second_document("version: 1\n"), None);
    }
}
