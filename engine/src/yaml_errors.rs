//! Where two of serde_yaml's errors really are. serde_yaml reports a duplicate key at the
//! mapping that holds it, and a second document with no position at all; a rule author needs
//! the repeated key and the `---` that starts the second document. Both come from one walk
//! over the parser's events (the text already failed to deserialise, so the walk stops at the
//! first parse error and gives up). saphyr-parser reads the [view](crate::yaml_view) of the
//! text in which the characters the two parsers disagree about read as serde_yaml reads them.

use crate::diag::Pos;
use crate::yaml_view::View;
use saphyr_parser::{Event, Span};

fn pos_of(span: &Span) -> Pos {
    Pos::new(span.start.line(), span.start.col() + 1)
}

enum Frame {
    Map {
        key_next: bool,
        watched: bool,
        seen: u32,
    },
    Seq,
}

/// The second key `name` of the mapping that starts at `at` or has a key there.
pub(crate) fn duplicate_key(text: &str, at: Pos, name: &str) -> Option<Pos> {
    let mut stack: Vec<Frame> = Vec::new();
    let view = View::new(text);
    for event in view.parser() {
        let (event, span) = event.ok()?;
        let pos = pos_of(&span);
        match event {
            Event::MappingStart(..) => stack.push(Frame::Map {
                key_next: true,
                watched: pos == at,
                seen: 0,
            }),
            Event::SequenceStart(..) => stack.push(Frame::Seq),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                value_done(&mut stack);
            }
            Event::Scalar(value, ..) => match stack.last_mut() {
                Some(Frame::Map {
                    key_next: key_next @ true,
                    watched,
                    seen,
                }) => {
                    *key_next = false;
                    *watched |= pos == at;
                    if *watched && view.original(value) == name {
                        *seen += 1;
                        if *seen == 2 {
                            return Some(pos);
                        }
                    }
                }
                _ => value_done(&mut stack),
            },
            Event::Alias(_) => value_done(&mut stack),
            _ => {}
        }
    }
    None
}

/// A value of the innermost mapping ended: a key comes next.
fn value_done(stack: &mut [Frame]) {
    if let Some(Frame::Map { key_next, .. }) = stack.last_mut() {
        *key_next = true;
    }
}

/// The characters `[start, end)` of the block-mapping entry whose key starts at `key`: the key,
/// its value, and what lies between the value and the next token. None if the key is not a
/// key there, or sits inside a flow collection (`{…}`, `[…]`), which cannot lose an entry
/// without its neighbours' commas and brackets.
pub(crate) fn entry_span(text: &str, key: Pos) -> Option<std::ops::Range<usize>> {
    struct Open {
        map: bool,
        flow: bool,
        key_next: bool,
    }
    fn value_ended(stack: &mut [Open]) {
        if let Some(top) = stack.last_mut()
            && top.map
        {
            top.key_next = true;
        }
    }
    let chars: Vec<char> = text.chars().collect();
    let mut stack: Vec<Open> = Vec::new();
    let mut start = None;
    let mut depth = 0usize;
    let view = View::new(text);
    for event in view.parser() {
        let (event, span) = event.ok()?;
        if let Some(start) = start {
            // The key's value: one scalar or alias, or a whole collection.
            match event {
                Event::MappingStart(..) | Event::SequenceStart(..) => depth += 1,
                Event::MappingEnd | Event::SequenceEnd => depth = depth.checked_sub(1)?,
                Event::Scalar(..) | Event::Alias(_) => {}
                _ => return None,
            }
            if depth == 0 {
                return Some(start..span.end.index());
            }
            continue;
        }
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let map = matches!(event, Event::MappingStart(..));
                stack.push(Open {
                    map,
                    flow: matches!(chars.get(span.start.index()), Some('{' | '[')),
                    key_next: map,
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                value_ended(&mut stack);
            }
            Event::Scalar(..) => match stack.last_mut() {
                Some(top) if top.key_next => {
                    if pos_of(&span) == key {
                        if stack.iter().any(|open| open.flow) {
                            return None;
                        }
                        start = Some(span.start.index());
                    } else {
                        top.key_next = false;
                    }
                }
                _ => value_ended(&mut stack),
            },
            Event::Alias(_) => value_ended(&mut stack),
            _ => {}
        }
    }
    None
}

/// Where the second document of `text` starts.
pub(crate) fn second_document(text: &str) -> Option<Pos> {
    let mut documents = 0;
    for event in View::new(text).parser() {
        let (event, span) = event.ok()?;
        if let Event::DocumentStart(..) = event {
            documents += 1;
            if documents == 2 {
                return Some(pos_of(&span));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repeated_key_is_found_in_block_and_flow_mappings() {
        let block = "version: 1\nrules:\n  - id: a\n    retry: { max_retries: 1 }\n    id: b\n";
        assert_eq!(
            duplicate_key(block, Pos::new(3, 5), "id"),
            Some(Pos::new(5, 5))
        );
        let flow = "rules: [{ id: a, if: x, id: b }]\n";
        assert_eq!(
            duplicate_key(flow, Pos::new(1, 9), "id"),
            Some(Pos::new(1, 25))
        );
        // A key of the same name in a nested mapping is not the repeat.
        let nested = "a: 1\nb: { a: 2 }\na: 3\n";
        assert_eq!(
            duplicate_key(nested, Pos::new(1, 1), "a"),
            Some(Pos::new(3, 1))
        );
    }

    /// The lines of `text` with the characters of `range` (but line ends) made spaces, each
    /// trimmed at the end (`\r` included).
    fn blanked(text: &str, range: std::ops::Range<usize>) -> Vec<String> {
        let out: String = text
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if range.contains(&i) && c != '\n' && c != '\r' {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        assert_eq!(out.chars().count(), text.chars().count());
        out.split('\n').map(|l| l.trim_end().to_string()).collect()
    }

    #[test]
    fn an_entry_spans_its_key_and_whole_value() {
        let text = "a:\n  bad:\n    x: 1\n\n    y: [1,\n      2]\n  good: 2\n";
        let range = entry_span(text, Pos::new(2, 3)).unwrap();
        assert_eq!(
            blanked(text, range),
            ["a:", "", "", "", "", "", "  good: 2", ""]
        );
        // A flow mapping over several lines is cut out whole, closing brace and all.
        let flow = "r:\n  bad: { x: 1,\n    y: 2 }\n  good: 1\n";
        let range = entry_span(flow, Pos::new(2, 3)).unwrap();
        assert_eq!(blanked(flow, range), ["r:", "", "", "  good: 1", ""]);
        // With CRLF line ends, and a sequence at the key's own indent.
        let crlf = "a:\r\n  bad:\r\n\r\n  - 1\r\n  good: 1\r\n";
        let range = entry_span(crlf, Pos::new(2, 3)).unwrap();
        assert_eq!(blanked(crlf, range), ["a:", "", "", "", "  good: 1", ""]);
    }

    #[test]
    fn no_entry_is_cut_out_of_a_flow_collection() {
        assert_eq!(entry_span("r: { a: 1, bad: 2 }\n", Pos::new(1, 12)), None);
        assert_eq!(entry_span("r: [{ bad: 2 }]\n", Pos::new(1, 7)), None);
        // A value is not a key.
        assert_eq!(entry_span("a: bad\n", Pos::new(1, 4)), None);
    }

    #[test]
    fn the_second_document_starts_at_its_marker() {
        assert_eq!(
            second_document("version: 1\n---\nversion: 1\n"),
            Some(Pos::new(2, 1))
        );
        assert_eq!(second_document("version: 1\n"), None);
    }
}
