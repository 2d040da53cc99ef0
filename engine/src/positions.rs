//! Where each value of a YAML file sits, so that semantic errors (a duplicate id, a rhai error
//! inside an `if`) can point at the value rather than at the file.
//!
//! serde deserialises the typed model but forgets positions, so a second, cheap pass over
//! saphyr-parser's events records the position of every key and value by its path, such as
//! `rules.3.retry.backoff`. The pass runs only on files that already deserialised; aliases are
//! not expanded (no alias bombs here). saphyr reads a view of the text (`yaml_view.rs`) in
//! which the characters the two parsers disagree about (byte-order marks, YAML 1.1 line
//! breaks) read as serde_yaml reads them. Should saphyr still stop at an error
//! where serde_yaml read on, a path the walk never reached is sought the slow way, by asking
//! serde_yaml (`yaml_seek.rs`): a value the model holds always has a place.

use crate::diag::{Pos, offset_of_pos, pos_of_offset};
use crate::yaml_seek;
use crate::yaml_view::View;
use saphyr_parser::{Event, ScalarStyle};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// Positions of keys and values by dotted path (`rules.0.id`, `defaults.retry`).
#[derive(Debug, Default, Clone)]
pub(crate) struct PositionIndex {
    values: Map<ValuePos>,
    keys: Map<Pos>,
    /// The earlier keys of a path written more than once in one mapping (`keys` holds the
    /// last), in file order: a map the model reads as a list (`labels:`) reports each.
    repeated: Map<Vec<Pos>>,
    /// Set when the walk stopped at a parse error: what the slow way needs.
    unfinished: Option<Arc<Unfinished>>,
}

/// The text of a file whose walk stopped short, and how much more of it may be parsed.
#[derive(Debug)]
struct Unfinished {
    text: String,
    /// Bytes that seeks may still parse. Each seek parses the whole file, so a large file
    /// with many lookups past the stop gets its nearest known container instead, in bounded
    /// time.
    budget: AtomicUsize,
}

/// How many bytes the seeks of one file may parse in all.
const SEEK_BUDGET: usize = 32 << 20;

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
pub(crate) struct ValuePos {
    /// Position of the first character of the value (the quote, for a quoted scalar).
    pub pos: Pos,
    /// Whether it was a quoted scalar, so text inside starts one column later.
    pub quoted: bool,
    /// Whether it was a block scalar (`|`, `>`), whose text starts on the next line.
    pub block: bool,
    /// Whether its text is elsewhere: an alias (`*name`), whose text is at the anchor, or
    /// the container that stands in for a value that could not be sought.
    pub alias: bool,
}

enum Frame {
    Map { key: Option<String> },
    Seq { next: usize },
}

impl PositionIndex {
    /// Indexes `text`. A parse error ends the walk; positions seen so far are kept, and
    /// the rest are sought in the text when asked for.
    pub(crate) fn build(text: &str) -> PositionIndex {
        Self::build_within(text, SEEK_BUDGET)
    }

    /// [`build`](Self::build), with `budget` bytes for the seeks past a parse error.
    fn build_within(text: &str, budget: usize) -> PositionIndex {
        let mut index = PositionIndex::default();
        let mut stack: Vec<Frame> = Vec::new();
        // The dotted path of the innermost open container, and where each level starts.
        let mut path = String::new();
        let mut levels: Vec<usize> = Vec::new();
        let view = View::new(text);
        for event in view.parser() {
            let Ok((event, span)) = event else {
                index.unfinished = Some(Arc::new(Unfinished {
                    text: text.to_owned(),
                    budget: AtomicUsize::new(budget),
                }));
                break;
            };
            let pos = Pos::new(span.start.line(), span.start.col() + 1);
            match event {
                Event::Scalar(value, style, ..) => {
                    if let Some(Frame::Map { key }) = stack.last_mut()
                        && key.is_none()
                    {
                        let value = view.original(value);
                        let at = joined(&path, &value);
                        if let Some(earlier) = index.keys.insert(at.clone(), pos) {
                            index.repeated.entry(at).or_default().push(earlier);
                        }
                        *key = Some(value.into_owned());
                        continue;
                    }
                    let quoted =
                        matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted);
                    let block = matches!(style, ScalarStyle::Literal | ScalarStyle::Folded);
                    let at =
                        Self::advance(&mut stack).map_or(String::new(), |seg| joined(&path, &seg));
                    index.values.insert(
                        at,
                        ValuePos {
                            pos,
                            quoted,
                            block,
                            alias: false,
                        },
                    );
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
                            alias: true,
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
                            alias: false,
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
    pub(crate) fn value(&self, path: &str) -> Option<Pos> {
        self.value_info(path).map(|v| v.pos)
    }

    /// Where the value at `path` starts, with how it was written.
    pub(crate) fn value_info(&self, path: &str) -> Option<ValuePos> {
        if let Some(v) = self.values.get(path) {
            return Some(*v);
        }
        let rest = self.unfinished.as_deref()?;
        let Some(seek) = rest.seek(path, false) else {
            return self.nearest_container(path);
        };
        let pos = seek?;
        Some(value_written_at(&rest.text, pos))
    }

    /// Where the key of the entry at `path` starts.
    pub(crate) fn key(&self, path: &str) -> Option<Pos> {
        if let Some(k) = self.keys.get(path) {
            return Some(*k);
        }
        // A value the walk reached without a key has none (a sequence element).
        let rest = self
            .unfinished
            .as_deref()
            .filter(|_| !self.values.contains_key(path))?;
        rest.seek(path, true).flatten()
    }

    /// Where each key of the entries at `path` starts, in file order: one position for a key
    /// written once, several for one repeated in its mapping.
    pub(crate) fn key_occurrences(&self, path: &str) -> Vec<Pos> {
        let mut all = self.repeated.get(path).cloned().unwrap_or_default();
        all.extend(self.key(path));
        all
    }

    /// The key's position if known, else the value's: the best place to point at an entry.
    pub(crate) fn entry(&self, path: &str) -> Option<Pos> {
        self.key(path).or_else(|| self.value(path))
    }

    /// The start of the innermost container of `path` that the walk reached, once the seeks
    /// are spent: a place near the value rather than none. It is marked as an alias, whose
    /// text is elsewhere, so that nothing looks for a place inside it.
    fn nearest_container(&self, path: &str) -> Option<ValuePos> {
        let mut at = path;
        let found = loop {
            at = at.rsplit_once('.').map_or("", |(parent, _)| parent);
            if let Some(v) = self.values.get(at) {
                break v.pos;
            }
            if at.is_empty() {
                break Pos::new(1, 1);
            }
        };
        Some(ValuePos {
            pos: found,
            quoted: false,
            block: false,
            alias: true,
        })
    }
}

impl Unfinished {
    /// Where serde_yaml puts `path` (its `key`, or its value), or `None` when the budget is
    /// spent.
    fn seek(&self, path: &str, key: bool) -> Option<Option<Pos>> {
        let len = self.text.len().max(1);
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(len))
            .ok()?;
        Some(yaml_seek::seek(&self.text, path, key))
    }
}

/// How the value that starts at `pos` of `text` is written, from its first character after
/// any `&anchor` and `!tag` (an alias is sought at its anchor, so it is never one).
fn value_written_at(text: &str, pos: Pos) -> ValuePos {
    let first = offset_of_pos(text, pos)
        .and_then(|at| {
            text[at..]
                .split_whitespace()
                .find(|token| !token.starts_with(['&', '!']))
        })
        .and_then(|token| token.chars().next());
    ValuePos {
        pos,
        quoted: matches!(first, Some('\'' | '"')),
        block: matches!(first, Some('|' | '>')),
        alias: false,
    }
}

/// Where the character at `offset` (counted in chars) of a scalar's text `value`, as YAML
/// parsed it, sits in the file `text`; `info` is where that scalar starts.
///
/// YAML folds lines, strips a block's indentation and unescapes quoted text, so a place in
/// the value and a place in the file differ as soon as the value spans lines. Every non-blank
/// character of the value comes from the next non-blank character (or escape sequence) of the
/// source, so walking both side by side finds it. `None` when the walk loses its way, and for
/// an alias (its text is at the anchor).
pub(crate) fn place_in_value(
    text: &str,
    info: ValuePos,
    value: &str,
    offset: usize,
) -> Option<Pos> {
    if info.alias {
        return None;
    }
    let mut start = offset_of_pos(text, info.pos)?;
    // The node's properties (`&anchor`, `!tag`) come before its text.
    while text[start..].starts_with(['&', '!']) {
        let rest = &text[start..];
        let token = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let blank = rest[token..]
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len() - token);
        start += token + blank;
    }
    let quote = if info.quoted {
        text[start..].chars().next()
    } else {
        None
    };
    let mut src = Walk {
        text,
        at: start + quote.map_or(0, char::len_utf8),
        quote,
    };
    // Just after the last character matched, and the blank value characters since then.
    let mut after_last = src.at;
    let mut blanks = 0;
    let chars: Vec<char> = value.chars().collect();
    for c in chars.iter().take(offset) {
        if c.is_whitespace() {
            blanks += 1;
            continue;
        }
        src.skip_blanks();
        src.unit()?;
        after_last = src.at;
        blanks = 0;
    }
    if chars.get(offset).is_some_and(|c| !c.is_whitespace()) {
        src.skip_blanks();
        return Some(pos_of_offset(text, src.at));
    }
    let end = pos_of_offset(text, after_last);
    Some(Pos::new(end.line, end.column + blanks))
}

/// A cursor over a scalar's source text.
struct Walk<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    at: usize,
    /// The opening quote of a quoted scalar.
    quote: Option<char>,
}

impl Walk<'_> {
    fn peek(&self, n: usize) -> Option<char> {
        self.text.get(self.at..)?.chars().nth(n)
    }

    fn take(&mut self, n: usize) {
        for _ in 0..n {
            if let Some(c) = self.peek(0) {
                self.at += c.len_utf8();
            }
        }
    }

    /// Skips source that yields only blanks: whitespace, and escapes of blanks.
    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() {
                self.take(1);
            } else if self.quote == Some('"')
                && c == '\\'
                && self
                    .peek(1)
                    .is_some_and(|e| e.is_whitespace() || "ntr_NLP".contains(e))
            {
                self.take(2);
            } else {
                break;
            }
        }
    }

    /// Moves past the source of one value character; `None` at the end of the scalar.
    fn unit(&mut self) -> Option<()> {
        let c = self.peek(0)?;
        match (self.quote, c) {
            (Some('"'), '\\') => {
                let hex = match self.peek(1)? {
                    'x' => 2,
                    'u' => 4,
                    'U' => 8,
                    _ => 0,
                };
                self.take(2 + hex);
            }
            (Some('\''), '\'') if self.peek(1) == Some('\'') => self.take(2),
            (Some(q), c) if c == q => return None,
            _ => self.take(1),
        }
        Some(())
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

    #[test]
    fn byte_order_marks_lose_no_position() {
        // In a comment, inside a value, and indenting a line as libyaml reads them.
        let text = "a: 1 # \u{feff}\nb: x\u{feff}y\nc:\n\u{feff} d: { e\u{feff}: 2 }\n";
        let ix = PositionIndex::build(text);
        assert!(ix.unfinished.is_none());
        assert_eq!(ix.value("b"), Some(Pos::new(2, 4)));
        assert_eq!(ix.key("c.d"), Some(Pos::new(4, 3)));
        assert_eq!(ix.value("c.d.e\u{feff}"), Some(Pos::new(4, 12)));
    }

    #[test]
    fn past_a_parse_error_of_the_walk_serde_yaml_is_asked() {
        // libyaml takes a flow sequence's line at column 1; saphyr stops there.
        let text = "a:\n  b: [1,\n2]\n  c: 'x'\nd:\n  - e: 1\n";
        let ix = PositionIndex::build(text);
        assert!(ix.unfinished.is_some());
        assert_eq!(ix.key("a.b"), Some(Pos::new(2, 3)));
        assert_eq!(
            ix.value_info("a.c"),
            Some(ValuePos {
                pos: Pos::new(4, 6),
                quoted: true,
                block: false,
                alias: false
            })
        );
        assert_eq!(ix.entry("d.0"), Some(Pos::new(6, 5)));
        assert_eq!(ix.key("d.0.e"), Some(Pos::new(6, 5)));
        assert_eq!(ix.value("d.1"), None);
        // With the seeks spent, the innermost container the walk reached.
        let spent = PositionIndex::build_within(text, 0);
        assert_eq!(spent.value("a.c"), Some(Pos::new(2, 3)));
        assert_eq!(spent.value("d.0.e"), Some(Pos::new(1, 1)));
    }

    /// The file position of `value`'s char `offset`, for the scalar at `path` of `text`.
    fn place(text: &str, path: &str, value: &str, offset: usize) -> Option<Pos> {
        let info = PositionIndex::build(text).value_info(path).unwrap();
        place_in_value(text, info, value, offset)
    }

    #[test]
    fn places_inside_multi_line_scalars_map_back_to_the_file() {
        // Literal block: the indentation is stripped.
        let text = "if: |\n  a &&\n    bad\nx: 1\n";
        assert_eq!(place(text, "if", "a &&\n  bad\n", 7), Some(Pos::new(3, 5)));
        // Folded block: two file lines are one line of the value.
        let text = "if: >\n  a &&\n  bad\n";
        assert_eq!(place(text, "if", "a && bad\n", 5), Some(Pos::new(3, 3)));
        // Double-quoted over two lines, with escapes.
        let text = "if: \"x == \\\"\\x41\\\" &&\n   bad\"\n";
        assert_eq!(
            place(text, "if", "x == \"A\" && bad", 12),
            Some(Pos::new(2, 4))
        );
        // Single-quoted with a doubled quote, then a plain scalar over two lines.
        let text = "a: 'it''s bad'\nb: one\n  bad\n";
        assert_eq!(place(text, "a", "it's bad", 5), Some(Pos::new(1, 11)));
        assert_eq!(place(text, "b", "one bad", 4), Some(Pos::new(3, 3)));
    }

    #[test]
    fn places_on_one_line_and_at_the_end_are_column_shifts() {
        let text = "if: 'x >  '\n";
        assert_eq!(place(text, "if", "x >  ", 0), Some(Pos::new(1, 6)));
        assert_eq!(place(text, "if", "x >  ", 3), Some(Pos::new(1, 9)));
        assert_eq!(place(text, "if", "x >  ", 5), Some(Pos::new(1, 11)));
    }
}
