//! The nesting bound of a YAML file: at most [`MAX_DEPTH`] collections inside one another.
//!
//! serde_yaml's cost grows with the square of the nesting (a 200 KB `[[[…]]]` took 25 s of
//! CPU), and a rule file arrives unauthenticated through `POST /v1/rules/validate`. So before
//! serde_yaml sees a file, one walk over saphyr-parser's events (a pull parser: it reads only
//! as far as it is asked) counts the open mappings and sequences and stops at the first one
//! past the bound: the text beyond it is never parsed.
//!
//! saphyr looks ahead for a possible key (at most 1024 characters) and gives up at 256 flow
//! collections with "recursion limit exceeded", so `[[[[…` ends the walk with that error
//! before the events reach the bound. Then the brackets after the last event are counted in
//! the text itself (quoted scalars and comments skipped) to find the one that passes the
//! bound; should that count go wrong, the error is shown where saphyr gave up, still past
//! the bound. A walk that meets any other syntax error first leaves it to serde_yaml, which
//! reports it in its own words.

use crate::diag::{Diagnostic, Pos};
use crate::yaml_view::View;
use saphyr_parser::{Event, Marker};

/// The most mappings and sequences a YAML file may nest inside one another. A rule file
/// needs about six.
pub(crate) const MAX_DEPTH: usize = 64;

/// The error at the first collection of `text` that opens deeper than [`MAX_DEPTH`], if any.
pub(crate) fn too_deep(path: &str, text: &str) -> Option<Diagnostic> {
    let view = View::new(text);
    let mut depth = 0usize;
    // Where the last event ended, in characters: where a count of the text picks up.
    let mut resume = 0usize;
    for event in view.parser() {
        let (event, span) = match event {
            Ok(e) => e,
            Err(e) if e.info() == "recursion limit exceeded" => {
                let at = count_brackets(text, resume, depth).unwrap_or_else(|| pos_of(e.marker()));
                return Some(error(path, at));
            }
            Err(_) => return None,
        };
        resume = span.end.index();
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(error(path, pos_of(&span.start)));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn pos_of(m: &Marker) -> Pos {
    Pos::new(m.line(), m.col() + 1)
}

fn error(path: &str, pos: Pos) -> Diagnostic {
    Diagnostic::error(
        path,
        Some(pos),
        format!(
            "the YAML is nested too deeply: more than {MAX_DEPTH} mappings and sequences inside \
             one another (a rule file needs a handful)"
        ),
    )
}

/// Where a flow bracket of `text` opens past the bound, counting from character `from` at
/// `depth`: `[` and `{` open, `]` and `}` close; quoted scalars and comments hold none.
fn count_brackets(text: &str, from: usize, mut depth: usize) -> Option<Pos> {
    let (mut line, mut col) = (1usize, 1usize);
    let mut chars = text.chars().enumerate().peekable();
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut before = ' ';
    while let Some((i, c)) = chars.next() {
        let here = Pos::new(line, col);
        if c == '\n' {
            (line, col) = (line + 1, 1);
            comment = false;
        } else {
            col += 1;
        }
        if i < from || comment {
            before = c;
            continue;
        }
        match quote {
            Some('"') if c == '\\' => {
                if chars.next_if(|&(_, n)| n != '\n').is_some() {
                    col += 1;
                }
            }
            Some('\'') if c == '\'' && chars.peek().is_some_and(|&(_, n)| n == '\'') => {
                chars.next();
                col += 1;
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(here);
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '"' | '\'' if matches!(before, ' ' | '\t' | '\n' | '[' | '{' | ',' | ':') => {
                    quote = Some(c)
                }
                '#' if matches!(before, ' ' | '\t' | '\n') => comment = true,
                _ => {}
            },
        }
        before = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn a_flow_sequence_past_the_bound_is_refused_where_it_passes_it() {
        assert!(too_deep("r.yaml", &flow(MAX_DEPTH)).is_none());
        let d = too_deep("r.yaml", &flow(MAX_DEPTH + 1)).expect("too deep");
        assert_eq!((d.line, d.column), (Some(1), Some(MAX_DEPTH + 1)));
        assert!(d.message.contains("more than 64"), "{}", d.message);
    }

    #[test]
    fn block_mappings_count_as_flow_collections_do() {
        let mut text = String::new();
        for level in 0..=MAX_DEPTH {
            text.push_str(&format!("{}k{level}:\n", "  ".repeat(level)));
        }
        text.push_str(&format!("{}leaf: 1\n", "  ".repeat(MAX_DEPTH + 1)));
        let d = too_deep("r.yaml", &text).expect("too deep");
        // The 65th mapping opens at its first key, on line 65.
        assert_eq!(d.line, Some(MAX_DEPTH + 1));
        let ok: String = text.lines().take(MAX_DEPTH).collect::<Vec<_>>().join("\n");
        assert!(too_deep("r.yaml", &format!("{ok} 1\n")).is_none());
    }

    #[test]
    fn the_walk_stops_at_the_bound_however_long_the_rest_is() {
        // 4 MiB of brackets, the largest body the admin API takes: only the first 65 are read.
        let huge = "[".repeat(4 * 1024 * 1024);
        let d = too_deep("r.yaml", &huge).expect("too deep");
        assert_eq!(d.column, Some(MAX_DEPTH + 1));
    }

    #[test]
    fn past_saphyrs_own_limit_the_bound_is_found_in_the_text() {
        // Past 255 flow levels saphyr gives up before it sends the first event.
        let d = too_deep("r.yaml", &flow(1000)).expect("too deep");
        assert_eq!((d.line, d.column), (Some(1), Some(MAX_DEPTH + 1)));
        let text = format!("version: 1\nrules: [\"a]]\", 'b''[', # [[\n  {}", flow(300));
        let d = too_deep("r.yaml", &text).expect("too deep");
        // The mapping is the first; `rules:` opens the second; 63 more on line 3.
        assert_eq!((d.line, d.column), (Some(3), Some(3 + 62)), "{d}");
    }

    #[test]
    fn a_syntax_error_before_the_bound_is_left_to_serde_yaml() {
        assert!(too_deep("r.yaml", "a: [1, 2\nb: }").is_none());
    }
}
