//! Where two of serde_yaml's errors really are. serde_yaml reports a duplicate key at the
//! mapping that holds it, and a second document with no position at all; a rule author needs
//! the repeated key and the `---` that starts the second document. Both come from one walk
//! over the parser's events (the text already failed to deserialise, so the walk stops at the
//! first parse error and gives up).

use crate::diag::Pos;
use saphyr_parser::{Event, Parser, Span};

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
    for event in Parser::new_from_str(text) {
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
                    if *watched && value == name {
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

/// Where the second document of `text` starts.
pub(crate) fn second_document(text: &str) -> Option<Pos> {
    let mut documents = 0;
    for event in Parser::new_from_str(text) {
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

    #[test]
    fn the_second_document_starts_at_its_marker() {
        assert_eq!(
            second_document("version: 1\n---\nversion: 1\n"),
            Some(Pos::new(2, 1))
        );
        assert_eq!(second_document("version: 1\n"), None);
    }
}
