//! Where each value of a YAML file sits, so that semantic errors (a duplicate id, a rhai error
//! inside an `if`) can point at the value rather than at the file.
//!
//! serde deserialises the typed model but forgets positions, so a second, cheap pass over the
//! parser's events records the position of every key and value by its path, such as
//! `rules.3.retry.backoff`. The pass runs only on files that already deserialised, so its
//! input is known to be well-formed; aliases are not expanded (no alias bombs here).

use crate::diag::Pos;
use saphyr_parser::{Event, Parser, ScalarStyle};
use std::collections::HashMap;

type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// Positions of keys and values by dotted path (`rules.0.id`, `defaults.retry`).
#[derive(Debug, Default, Clone)]
pub struct PositionIndex {
    values: Map<ValuePos>,
    keys: Map<Pos>,
}

fn joined(path: &str, segment: &str) -> String {
    if path.is_empty() {
        return segment.to_string();
    }
    let mut s = String::with_capacity(path.len() + 1 + segment.len());
    s.push_str(path);
    s.push('.');
    s.push_str(segment);
    s
}

/// Where a value starts and how it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValuePos {
    /// Position of the first character of the value (the quote, for a quoted scalar).
    pub pos: Pos,
    /// Whether it was a quoted scalar, so text inside starts one column later.
    pub quoted: bool,
    /// Whether it was a block scalar (`|`, `>`), whose text starts on the next line.
    pub block: bool,
}

enum Frame {
    Map { key: Option<String> },
    Seq { next: usize },
}

impl PositionIndex {
    /// Indexes `text`. A parse error ends the walk; positions seen so far are kept.
    pub fn build(text: &str) -> PositionIndex {
        let mut index = PositionIndex::default();
        let mut stack: Vec<Frame> = Vec::new();
        // The dotted path of the innermost open container, and where each level starts.
        let mut path = String::new();
        let mut levels: Vec<usize> = Vec::new();
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else { break };
            let pos = Pos::new(span.start.line(), span.start.col() + 1);
            match event {
                Event::Scalar(value, style, ..) => {
                    if let Some(Frame::Map { key }) = stack.last_mut()
                        && key.is_none()
                    {
                        index.keys.insert(joined(&path, &value), pos);
                        *key = Some(value.into_owned());
                        continue;
                    }
                    let quoted =
                        matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted);
                    let block = matches!(style, ScalarStyle::Literal | ScalarStyle::Folded);
                    let at =
                        Self::advance(&mut stack).map_or(String::new(), |seg| joined(&path, &seg));
                    index.values.insert(at, ValuePos { pos, quoted, block });
                }
                Event::Alias(_) => {
                    let at =
                        Self::advance(&mut stack).map_or(String::new(), |seg| joined(&path, &seg));
                    index.values.insert(
                        at,
                        ValuePos {
                            pos,
                            quoted: false,
                            block: false,
                        },
                    );
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    levels.push(path.len());
                    if let Some(seg) = Self::advance(&mut stack) {
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(&seg);
                    }
                    index.values.insert(
                        path.clone(),
                        ValuePos {
                            pos,
                            quoted: false,
                            block: false,
                        },
                    );
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map { key: None }
                    } else {
                        Frame::Seq { next: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    path.truncate(levels.pop().unwrap_or(0));
                }
                _ => {}
            }
        }
        index
    }

    /// The segment of the next value in the innermost container, moving that container on.
    fn advance(stack: &mut [Frame]) -> Option<String> {
        match stack.last_mut()? {
            Frame::Map { key } => Some(key.take().unwrap_or_default()),
            Frame::Seq { next } => {
                *next += 1;
                Some((*next - 1).to_string())
            }
        }
    }

    /// Where the value at `path` starts.
    pub fn value(&self, path: &str) -> Option<Pos> {
        self.values.get(path).map(|v| v.pos)
    }

    /// Where the value at `path` starts, with how it was written.
    pub fn value_info(&self, path: &str) -> Option<ValuePos> {
        self.values.get(path).copied()
    }

    /// Where the key of the entry at `path` starts.
    pub fn key(&self, path: &str) -> Option<Pos> {
        self.keys.get(path).copied()
    }

    /// The key's position if known, else the value's: the best place to point at an entry.
    pub fn entry(&self, path: &str) -> Option<Pos> {
        self.key(path).or_else(|| self.value(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_and_values_by_path() {
        let text = "version: 1\nrules:\n  - id: a\n    if: 'x > 1'\n  - id: b\n    match: { code: [A, B] }\n";
        let ix = PositionIndex::build(text);
        assert_eq!(ix.value("version"), Some(Pos::new(1, 10)));
        assert_eq!(ix.value("rules.0.id"), Some(Pos::new(3, 9)));
        assert_eq!(ix.key("rules.0.if"), Some(Pos::new(4, 5)));
        let guard = ix.value_info("rules.0.if").unwrap();
        assert_eq!(guard.pos, Pos::new(4, 9));
        assert!(guard.quoted);
        assert_eq!(ix.value("rules.1.id"), Some(Pos::new(5, 9)));
        assert_eq!(ix.value("rules.1.match.code.1"), Some(Pos::new(6, 24)));
        assert_eq!(ix.entry("rules.1"), Some(Pos::new(5, 5)));
    }
}
