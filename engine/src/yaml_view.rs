//! The text of a rule file as saphyr-parser must read it to see what serde_yaml read.
//!
//! A file is deserialised by serde_yaml (libyaml) and located by passes over saphyr-parser's
//! events ([`positions`](crate::positions), `yaml_errors`). The two parsers read some
//! characters differently, and where they do, a pass over saphyr's events stops at an error
//! or walks another structure, and positions are lost:
//!
//! - U+FEFF, the byte-order mark: libyaml takes one inside a document as an ordinary
//!   character (and at the start of a line, as one column of indentation), while saphyr
//!   follows YAML 1.2 and stops with an error.
//! - U+0085, U+2028 and U+2029: line breaks to libyaml (YAML 1.1), characters of a line to
//!   saphyr (YAML 1.2).
//!
//! saphyr therefore reads a view in which each is replaced by a character it reads the way
//! libyaml reads the original: a byte-order mark by a space at the start of a line and
//! elsewhere by a private-use character that the file does not use, the three line breaks by
//! `\n`. Characters are replaced one for one, so lines (counted as
//! [`line_starts`](crate::diag::line_starts) counts them), columns and character offsets are
//! those of the file.

use saphyr_parser::{Parser, StrInput};
use std::borrow::Cow;

const BOM: char = '\u{feff}';

/// A file's text as saphyr-parser reads it.
pub(crate) struct View<'a> {
    text: Cow<'a, str>,
    /// What stands for a byte-order mark inside a line, when the file has one.
    stand_in: Option<char>,
}

impl<'a> View<'a> {
    /// The view of `text`: `text` itself unless it holds a byte-order mark.
    pub(crate) fn new(text: &'a str) -> View<'a> {
        if !text.contains([BOM, '\u{85}', '\u{2028}', '\u{2029}']) {
            return View {
                text: Cow::Borrowed(text),
                stand_in: None,
            };
        }
        let stand_in = unused_private_char(text);
        let mut out = String::with_capacity(text.len());
        let mut line_start = true;
        for c in text.chars() {
            let read_as = match c {
                BOM if line_start => ' ',
                BOM => stand_in,
                '\u{85}' | '\u{2028}' | '\u{2029}' => '\n',
                c => c,
            };
            out.push(read_as);
            line_start = matches!(read_as, '\n' | '\r');
        }
        View {
            text: Cow::Owned(out),
            stand_in: Some(stand_in),
        }
    }

    /// A parser over the view.
    pub(crate) fn parser(&self) -> Parser<'_, StrInput<'_>> {
        Parser::new_from_str(&self.text)
    }

    /// A scalar as the file has it: the view's stand-ins made byte-order marks again.
    pub(crate) fn original<'v>(&self, scalar: Cow<'v, str>) -> Cow<'v, str> {
        match self.stand_in {
            Some(c) if scalar.contains(c) => Cow::Owned(scalar.replace(c, "\u{feff}")),
            _ => scalar,
        }
    }
}

/// A private-use character that `text` neither holds nor could write as an escape (`\uE000`),
/// so that one in a scalar of the view can only be a stand-in.
fn unused_private_char(text: &str) -> char {
    let lower = text.to_ascii_lowercase();
    ('\u{e000}'..='\u{f8ff}')
        .find(|&c| !text.contains(c) && !lower.contains(&format!("{:x}", c as u32)))
        // A file holding all 6,400 of them and their escapes is beyond 100 KB of
        // private-use text; its keys may then show a byte-order mark for one of them.
        .unwrap_or('\u{e000}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use saphyr_parser::Event;

    /// The scalars saphyr reads from `text`'s view, as the file has them, or the error.
    fn scalars(text: &str) -> Result<Vec<String>, String> {
        let view = View::new(text);
        let mut out = Vec::new();
        for event in view.parser() {
            match event {
                Ok((Event::Scalar(v, ..), _)) => out.push(view.original(v).into_owned()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(out)
    }

    #[test]
    fn a_byte_order_mark_reads_as_libyaml_reads_it() {
        // In a comment, nothing; inside a value, a character of it.
        assert_eq!(
            scalars("a: 1 # x\u{feff}y\nb: s\u{feff}t\n").unwrap(),
            ["a", "1", "b", "s\u{feff}t"]
        );
        // At the start of a line, a column of indentation.
        assert!(scalars("a: 1\n\u{feff}b: 2\n").is_err());
        assert_eq!(scalars("a:\n\u{feff} b: 2\n").unwrap(), ["a", "b", "2"]);
    }

    #[test]
    fn yaml_1_1_line_breaks_end_lines() {
        assert_eq!(
            scalars("a: 1\u{85}b: 2\u{2028}c: 3\u{2029}d: 4\n").unwrap(),
            ["a", "1", "b", "2", "c", "3", "d", "4"]
        );
    }

    #[test]
    fn the_stand_in_is_no_character_of_the_file() {
        let text = "a: \"\\ue000\u{e001}\"\nb: \u{feff}\n";
        let c = View::new(text).stand_in.unwrap();
        assert!(c != '\u{e000}' && c != '\u{e001}', "{c:?}");
        assert_eq!(
            scalars(text).unwrap(),
            ["a", "\u{e000}\u{e001}", "b", "\u{feff}"]
        );
    }
}
