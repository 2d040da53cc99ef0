//! libyaml's syntax errors in a rule author's words.
//!
//! serde_yaml passes on libyaml's messages (`found character that cannot start any token`,
//! `did not find expected key, while parsing a block mapping at line 3 column 5`), which name
//! the parser's state rather than the author's mistake. The few mistakes that rule files
//! really make (a tab in the indentation, a key indented too deep, an unquoted glob such as
//! `*DB_LOCK` that YAML reads as an alias) are recognised from the message and the character
//! at its position, and said plainly; anything else keeps libyaml's words. Indentation
//! mistakes are worked out in [`yaml_indent`](crate::yaml_indent), which `reparse` (the text
//! deserialised again as the file was) helps to choose the column to name.

use crate::diag::{Pos, offset_of_pos};
use crate::yaml_indent::{self, Reparse};

/// The message (and, where libyaml points elsewhere, the position) a rule author should read
/// for the YAML error `message` at `pos` of `text`; `None` keeps the message.
pub(crate) fn reword(
    text: &str,
    pos: Pos,
    message: &str,
    reparse: Reparse<'_>,
) -> Option<(String, Pos)> {
    let at = char_at(text, pos);
    if at == Some('\t')
        && (message.starts_with("found character that cannot start any token")
            || message.starts_with("found a tab character"))
    {
        let line_start = offset_of_pos(text, Pos::new(pos.line, 1))?;
        let before = &text[line_start..offset_of_pos(text, pos)?];
        let message = if before.chars().all(|c| c == ' ' || c == '\t') {
            "tabs are not allowed for indentation; use spaces"
        } else {
            "a tab cannot separate YAML tokens here; use spaces"
        };
        return Some((message.into(), pos));
    }
    // Before libyaml's words: a fold ends in a type error as often as in a syntax error.
    if let Some(folded) = yaml_indent::folded_key(text, pos, message) {
        return Some(folded);
    }
    if let Some(c @ ('@' | '`')) = at
        && message.starts_with("found character that cannot start any token")
    {
        return Some((
            format!("a value cannot start with '{c}', which YAML reserves; quote the value"),
            pos,
        ));
    }
    if message == "unknown anchor" && at == Some('*') {
        return Some((alias_message(text, pos), pos));
    }
    if message.starts_with("did not find expected alphabetic or numeric character")
        && let Some(star) = context(message, "while scanning an alias")
        && char_at(text, star) == Some('*')
    {
        return Some((alias_message(text, star), star));
    }
    if message.starts_with("did not find expected key")
        && let Some(map) = context(message, "while parsing a block mapping")
    {
        if at == Some('-') {
            if let Some(message) = yaml_indent::item_short_of_list(text, pos) {
                return Some((message, pos));
            }
            return Some((
                format!(
                    "a list item ('- ') stands among the keys of the mapping at line {}, whose \
                     keys start at column {}; indent it under a key that ends with ':'",
                    map.line, map.column
                ),
                pos,
            ));
        }
        if pos.column > map.column {
            let message = yaml_indent::short_block_text(text, pos)
                .or_else(|| yaml_indent::key_between_mappings(text, pos, map, reparse))
                .unwrap_or_else(|| {
                    format!(
                        "this line is indented to column {}, deeper than the keys of the mapping \
                         at line {} (column {2}); line it up with column {2}",
                        pos.column, map.line, map.column
                    )
                });
            return Some((message, pos));
        }
    }
    // libyaml stops where the key it took the line for should have had its ':'.
    if message.starts_with("could not find expected ':'")
        && let Some(line) = context(message, "while scanning a simple key")
        && let Some(plain) = yaml_indent::short_block_text(text, line)
    {
        return Some((plain, line));
    }
    if message.starts_with("did not find expected '-' indicator")
        && let Some(list) = context(message, "while parsing a block collection")
    {
        let (column, line, items) = (pos.column, list.line, list.column);
        let message = if at == Some('-') {
            format!(
                "this list item ('- ') is indented to column {column}, but the list above it \
                 (line {line}) has its items at column {items}; line it up with column {items}"
            )
        } else {
            yaml_indent::short_block_text(text, pos)
                .or_else(|| yaml_indent::key_between_list_items(text, pos, list))
                .unwrap_or_else(|| {
                    format!(
                        "this line is indented to column {column}, but the list at line {line} \
                         has its items ('- ') at column {items}; line it up with the keys above \
                         it, or start a new item with '- ' at column {items}"
                    )
                })
        };
        return Some((message, pos));
    }
    None
}

/// The message for a plain value that starts with `*` at `star`: YAML reads it as an alias.
fn alias_message(text: &str, star: Pos) -> String {
    let offset = offset_of_pos(text, star).unwrap_or(text.len());
    let glob: String = text[offset..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | ']' | '}' | '#'))
        .collect();
    format!("a value starting with '*' is a YAML alias: quote the glob, \"{glob}\"")
}

/// The character at `pos`, if the text has one there.
fn char_at(text: &str, pos: Pos) -> Option<char> {
    text.get(offset_of_pos(text, pos)?..)?.chars().next()
}

/// The position libyaml gives for the context `what` (`while parsing a block mapping at line
/// 3 column 5`): 1-based, as the file's.
fn context(message: &str, what: &str) -> Option<Pos> {
    let rest = &message[message.find(what)? + what.len()..];
    let rest = rest.strip_prefix(" at line ")?;
    let (line, rest) = rest.split_once(" column ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(Pos::new(line.parse().ok()?, column.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use crate::load::parse_yaml;
    use crate::model::RuleFile;

    /// The first diagnostic of `text` as `line:column: message`.
    fn first_error(text: &str) -> String {
        let d = parse_yaml::<RuleFile>("r.yaml", text)
            .unwrap_err()
            .remove(0);
        format!("{}:{}: {}", d.line.unwrap(), d.column.unwrap(), d.message)
    }

    #[test]
    fn a_tab_in_the_indentation_is_named() {
        let text = "version: 1\nrules:\n  - id: a\n    retry:\n\tmax_retries: 3\n";
        assert_eq!(
            first_error(text),
            "5:1: tabs are not allowed for indentation; use spaces"
        );
        // After spaces, in a value that goes on over lines.
        let text = "version: 1\nrules:\n  - id: a\n    retry:\n      max_retries: 3\n\t  x: 1\n";
        assert_eq!(
            first_error(text),
            "6:1: tabs are not allowed for indentation; use spaces"
        );
    }

    #[test]
    fn a_list_item_out_of_line_with_the_items_above_is_told_their_column() {
        let text = "version: 1\nheat:\n  half_life: 30s\n  weights:\n    - { code: A, weight: \
                    3 }\n   - { code: B, weight: 2 }\n";
        assert_eq!(
            first_error(text),
            "6:4: this list item ('- ') is indented to column 4, but the list above it (line 5) \
             has its items at column 5; line it up with column 5"
        );
        // Deeper than the items above.
        let deeper = "version: 1\nheat:\n  half_life: 30s\n  weights:\n    - { code: A, weight: \
                      3 }\n     - { code: B, weight: 2 }\n";
        assert_eq!(
            first_error(deeper),
            "6:6: this list item ('- ') is indented to column 6, but the list above it (line 5) \
             has its items at column 5; line it up with column 5"
        );
        // Between the list's items and its parent's key, libyaml ends the list first.
        let text = "version: 1\nheat:\n  half_life: 30s\n  weights:\n     - { code: A, weight: \
                    3 }\n    - { code: B, weight: 2 }\n";
        assert_eq!(
            first_error(text),
            "6:5: this list item ('- ') is indented to column 5, but the list above it (line 5) \
             has its items at column 6; line it up with column 6"
        );
    }

    #[test]
    fn an_unquoted_glob_starting_with_a_star_is_named() {
        let alias = "a value starting with '*' is a YAML alias: quote the glob,";
        let block = "version: 1\nrules:\n  - id: a\n    match:\n      code: *DB_LOCK\n";
        assert_eq!(first_error(block), format!("5:13: {alias} \"*DB_LOCK\""));
        let flow = "version: 1\nrules:\n  - id: a\n    match: { code: [X, *DB_LOCK] }\n";
        assert_eq!(first_error(flow), format!("4:24: {alias} \"*DB_LOCK\""));
        // A lone star, where libyaml points after it.
        let star = "version: 1\nrules:\n  - id: a\n    match:\n      code: * # any\n";
        assert_eq!(first_error(star), format!("5:13: {alias} \"*\""));
    }

    #[test]
    fn other_syntax_errors_keep_libyaml_words() {
        let text = "version: 1\nrules:\n  - id: a\n    match: { code: [A, B }\n";
        assert!(
            first_error(text).contains("did not find expected ',' or ']'"),
            "{}",
            first_error(text)
        );
    }
}
