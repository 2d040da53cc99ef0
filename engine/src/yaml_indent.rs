//! Indentation mistakes in a rule author's words: a key indented to a column that no mapping
//! above it has, or indented so deep that YAML reads it as part of the value above.
//!
//! Each is said at the misplaced key, with the column it should be at. libyaml names only the
//! mapping it was parsing when it stopped, which for a key indented between two mappings is
//! the outer one; the author usually meant the inner. Where both are possible, the text is
//! deserialised again with the key moved to each, and the one that reads further is named.
//!
//! A key indented deeper than the key above it, whose value is a plain scalar, is no syntax
//! error to YAML: the line continues that scalar (`max_retries: 5` then `   backoff: …` reads
//! as `"5 backoff"`), and serde then complains about the value's type. Such a fold is found
//! from the text, whatever the error it led to.
//!
//! A line of block text (`description: >`) indented less than the text's first line ends the
//! text, and a list item out of line with the items above ends the list; libyaml then
//! complains about a key, and the line is said to be the text's or the list's.

use crate::diag::{Pos, line_starts};

/// Deserialises a changed text the way the file was: `Ok`, or where its first error is.
pub(crate) type Reparse<'a> = &'a dyn Fn(&str) -> Result<(), Option<Pos>>;

/// The message for a key that YAML folded into the plain value above it, if the error at
/// `pos` comes from one: serde's error at the value's start, or libyaml's at the colon
/// after the folded key. The position returned is the misplaced key's.
pub(crate) fn folded_key(text: &str, pos: Pos, message: &str) -> Option<(String, Pos)> {
    let lines = lines(text);
    let fold = fold_of(&lines, pos).or_else(|| {
        if !message.starts_with("mapping values are not allowed in this context") {
            return None;
        }
        let owner = owner_above(&lines, pos.line)?;
        fold_of(&lines, owner).filter(|f| f.at.line == pos.line)
    })?;
    let message = format!(
        "'{}' at line {} column {} is indented deeper than '{}' above it, so YAML reads it \
         as part of that value; line it up with column {}",
        fold.key, fold.at.line, fold.at.column, fold.owner, fold.owner_column
    );
    Some((message, fold.at))
}

/// The message for the key at `at` that libyaml found where the block mapping whose keys
/// start at `map` wanted its next key (`at` is deeper than that mapping's keys).
pub(crate) fn key_between_mappings(
    text: &str,
    at: Pos,
    map: Pos,
    reparse: Reparse<'_>,
) -> Option<String> {
    let lines = lines(text);
    let key = key_starting_at(&lines, at)?;
    let outer = match key_above(&lines, at.line, map.column) {
        Some(name) => format!("'{name}'"),
        None => format!("the keys of the mapping at line {}", map.line),
    };
    let (line, column) = (at.line, at.column);
    Some(match inner_key(&lines, at) {
        Some((inner_column, inner)) => {
            let to = if reads_further(text, at, inner_column, map.column, reparse) {
                inner_column
            } else {
                map.column
            };
            format!(
                "'{key}' at line {line} column {column} is indented less than '{inner}' above \
                 it (column {inner_column}) but deeper than {outer} (column {}); line it up \
                 with column {to}",
                map.column
            )
        }
        None => format!(
            "'{key}' at line {line} column {column} is indented deeper than {outer} above it \
             (column {0}); line it up with column {0}",
            map.column
        ),
    })
}

/// The message for the key at `at` that libyaml found where the block sequence whose items
/// (`- `) start at `list` wanted its next item.
pub(crate) fn key_between_list_items(text: &str, at: Pos, list: Pos) -> Option<String> {
    let lines = lines(text);
    let key = key_starting_at(&lines, at)?;
    let (inner_column, inner) = inner_key(&lines, at)?;
    let (line, column, items) = (at.line, at.column, list.column);
    if column == items {
        return Some(format!(
            "'{key}' at line {line} column {column} stands at the column of the list's items \
             ('- ', column {items}) but starts none; line it up with '{inner}' above it \
             (column {inner_column}), or put '- ' before it to start a new item"
        ));
    }
    if column < items {
        return None;
    }
    Some(format!(
        "'{key}' at line {line} column {column} is indented less than '{inner}' above it \
         (column {inner_column}) but deeper than the list's items ('- ', column {items}); line \
         it up with column {inner_column}, or start a new item with '- ' at column {items}"
    ))
}

/// The message for the line at `at`, which is no key, when it was meant to go on with the
/// block text (`description: >`) above it but is indented less than that text's first line
/// (YAML ends the text there), or no deeper than the key that starts the text (YAML reads it
/// as a key).
pub(crate) fn short_block_text(text: &str, at: Pos) -> Option<String> {
    let lines = lines(text);
    if key_starting_at(&lines, at).is_some() {
        return None;
    }
    let block = block_above(&lines, at.line)?;
    let (column, owner) = (at.column, block.owner);
    match block.text_column {
        Some(text_column) if column < text_column => Some(format!(
            "this line is indented to column {column}, less than the text of '{owner}' above \
             it (column {text_column}), so YAML ends that text before it; line it up with \
             column {text_column}"
        )),
        None if column <= block.owner_column => Some(format!(
            "this line is indented to column {column}, no deeper than '{owner}' above it \
             (column {}), so YAML reads it as a key, not as the text that '{owner}' starts at \
             line {}; indent it to column {}",
            block.owner_column,
            block.header_line,
            block.owner_column + 2
        )),
        _ => None,
    }
}

/// A key whose value is block text (`|` or `>`), as the lines above a line show it.
struct Block<'a> {
    owner: &'a str,
    owner_column: usize,
    header_line: usize,
    /// The column of the text's first line, which sets its indentation; `None` when no line
    /// of text comes before the line looked from.
    text_column: Option<usize>,
}

/// The block text that the lines above line `line` (1-based) end in, if they do.
fn block_above<'a>(lines: &[&'a str], line: usize) -> Option<Block<'a>> {
    let mut text_column = None;
    for (i, text) in lines.iter().enumerate().take(line.checked_sub(1)?).rev() {
        let content = text.trim_start_matches(' ');
        if content.trim().is_empty() {
            continue;
        }
        if let Some(key) = key_line(text) {
            let (_, value) = key.value?;
            if !value.starts_with(['|', '>']) || text_column.is_some_and(|c| c <= key.column) {
                return None;
            }
            return Some(Block {
                owner: key.name,
                owner_column: key.column,
                header_line: i + 1,
                text_column,
            });
        }
        text_column = Some(text.len() - content.len() + 1);
    }
    None
}

/// The message for the list item at `at` that libyaml found among the keys of a mapping,
/// when a list above it, deeper than it, is the one it was meant to go on.
pub(crate) fn item_short_of_list(text: &str, at: Pos) -> Option<String> {
    let lines = lines(text);
    let mut list: Option<(usize, usize)> = None;
    for (i, line) in lines.iter().enumerate().take(at.line.checked_sub(1)?).rev() {
        let content = line.trim_start_matches(' ');
        if content.trim().is_empty() || content.starts_with('#') {
            continue;
        }
        let column = line.len() - content.len() + 1;
        if column <= at.column {
            break;
        }
        if (content == "-" || content.starts_with("- ")) && list.is_none_or(|(c, _)| column < c) {
            list = Some((column, i + 1));
        }
    }
    let (items, line) = list?;
    Some(format!(
        "this list item ('- ') is indented to column {}, but the list above it (line {line}) \
         has its items at column {items}; line it up with column {items}",
        at.column
    ))
}

/// A key that continues the plain value of the key above it.
struct Fold<'a> {
    /// The key whose value swallowed the line, and its column.
    owner: &'a str,
    owner_column: usize,
    /// The swallowed key, and where it starts.
    key: &'a str,
    at: Pos,
}

/// The key that the plain value starting at `value` swallows, if it does: a following line
/// indented deeper than the value's key, which YAML reads as more of the value, that holds
/// `key:`. A plain value cannot hold `: `, so such a line is always a mistake.
fn fold_of<'a>(lines: &[&'a str], value: Pos) -> Option<Fold<'a>> {
    let owner = key_line(lines.get(value.line.checked_sub(1)?)?)?;
    let (value_column, rest) = owner.value?;
    if value_column != value.column
        || rest.starts_with(['"', '\'', '|', '>', '{', '[', '&', '*', '!', '%', '@', '`'])
        || rest.contains(" #")
        || rest.contains(": ")
    {
        return None;
    }
    for (i, line) in lines.iter().enumerate().skip(value.line) {
        let content = line.trim_start_matches(' ');
        if content.trim().is_empty() {
            continue;
        }
        let column = line.len() - content.len() + 1;
        if content.starts_with(['\t', '#']) || column <= owner.column {
            return None;
        }
        if let Some((key, _)) = split_key(content) {
            return Some(Fold {
                owner: owner.name,
                owner_column: owner.column,
                key,
                at: Pos::new(i + 1, column),
            });
        }
        if content.contains(" #") {
            return None;
        }
    }
    None
}

/// Where the value starts of the nearest key above line `line` (1-based), skipping lines of
/// plain text that a value may go on over.
fn owner_above(lines: &[&str], line: usize) -> Option<Pos> {
    for (i, text) in lines.iter().enumerate().take(line.checked_sub(1)?).rev() {
        let content = text.trim_start_matches(' ');
        if content.trim().is_empty() {
            continue;
        }
        if content.starts_with('#') {
            return None;
        }
        if let Some(key) = key_line(text) {
            return key.value.map(|(column, _)| Pos::new(i + 1, column));
        }
    }
    None
}

/// The nearest key above `at` that is indented deeper than it, of the least such indent
/// (the keys of the mapping that `at` was likely meant to continue), with its column. Only
/// the lines back to the first one indented no deeper than `at` are looked at.
fn inner_key<'a>(lines: &[&'a str], at: Pos) -> Option<(usize, &'a str)> {
    let mut best: Option<(usize, &str)> = None;
    for text in lines.iter().take(at.line.checked_sub(1)?).rev() {
        let content = text.trim_start_matches(' ');
        if content.trim().is_empty() || content.starts_with('#') {
            continue;
        }
        if content.starts_with('\t') {
            break;
        }
        if let Some(key) = key_line(text)
            && key.column > at.column
            && best.is_none_or(|(column, _)| key.column < column)
        {
            best = Some((key.column, key.name));
        }
        if text.len() - content.len() < at.column {
            break;
        }
    }
    best
}

/// The name of the nearest key above line `line` at `column`.
fn key_above<'a>(lines: &[&'a str], line: usize, column: usize) -> Option<&'a str> {
    lines
        .iter()
        .take(line.checked_sub(1)?)
        .rev()
        .filter_map(|text| key_line(text))
        .find(|key| key.column == column)
        .map(|key| key.name)
}

/// The name of the key that line `at.line` starts with at `at.column`.
fn key_starting_at<'a>(lines: &[&'a str], at: Pos) -> Option<&'a str> {
    let text = lines.get(at.line.checked_sub(1)?)?;
    let content = text.trim_start_matches(' ');
    if text.len() - content.len() + 1 != at.column {
        return None;
    }
    split_key(content).map(|(name, _)| name)
}

/// Whether `text` with line `at.line` moved to column `inner` reads at least as far as with
/// it moved to column `outer`: whole, or to a later line.
fn reads_further(text: &str, at: Pos, inner: usize, outer: usize, reparse: Reparse<'_>) -> bool {
    let reach = |column| match reparse(&moved(text, at.line, column)) {
        Ok(()) => usize::MAX,
        Err(pos) => pos.map_or(0, |p| p.line),
    };
    reach(inner) >= reach(outer)
}

/// `text` with the indentation of line `line` made `column - 1` spaces.
fn moved(text: &str, line: usize, column: usize) -> String {
    let Some(start) = line_starts(text).nth(line - 1) else {
        return text.to_owned();
    };
    let spaces = text[start..].len() - text[start..].trim_start_matches(' ').len();
    format!(
        "{}{}{}",
        &text[..start],
        " ".repeat(column - 1),
        &text[start + spaces..]
    )
}

/// A line that holds a key: the key's 1-based column (after the `- ` of any list items the
/// line opens), its name, and the column and text of the value that follows on the line.
struct KeyLine<'a> {
    column: usize,
    name: &'a str,
    value: Option<(usize, &'a str)>,
}

fn key_line(line: &str) -> Option<KeyLine<'_>> {
    let mut rest = line.trim_start_matches(' ');
    let mut column = line.len() - rest.len() + 1;
    while let Some(item) = rest.strip_prefix('-').filter(|r| r.starts_with(' ')) {
        let content = item.trim_start_matches(' ');
        column += 1 + item.len() - content.len();
        rest = content;
    }
    let (name, after) = split_key(rest)?;
    let value = after.trim_start_matches(' ');
    let value_column =
        column + rest[..rest.len() - after.len()].chars().count() + (after.len() - value.len());
    let value = (!value.is_empty() && !value.starts_with('#')).then_some((value_column, value));
    Some(KeyLine {
        column,
        name,
        value,
    })
}

/// `name: rest` as (`name`, `rest`) for a plain key: the first colon followed by a space, a
/// tab or the line's end ends it.
fn split_key(content: &str) -> Option<(&str, &str)> {
    let colon = content.match_indices(':').find_map(|(i, _)| {
        let after = &content[i + 1..];
        (after.is_empty() || after.starts_with([' ', '\t'])).then_some(i)
    })?;
    let name = content[..colon].trim_end();
    let indicator = [
        '"', '\'', '{', '[', '#', '&', '*', '!', '|', '>', '%', '@', '`', '?', ',', ']', '}',
    ];
    if name.is_empty() || name.starts_with(indicator) || name.contains(" #") {
        return None;
    }
    Some((name, &content[colon + 1..]))
}

/// The lines of `text` without their line breaks, as YAML counts them.
fn lines(text: &str) -> Vec<&str> {
    let starts: Vec<usize> = line_starts(text).collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let end = starts.get(i + 1).copied().unwrap_or(text.len());
            text[start..end].trim_end_matches(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::load::parse_yaml;
    use crate::model::RuleFile;

    /// The one diagnostic of `text` as `line:column: message`; a second one fails the test.
    fn only_error(text: &str) -> String {
        let diags = parse_yaml::<RuleFile>("r.yaml", text).unwrap_err();
        assert_eq!(diags.len(), 1, "{diags:?}");
        let d = &diags[0];
        format!("{}:{}: {}", d.line.unwrap(), d.column.unwrap(), d.message)
    }

    const RULE: &str = "version: 1\nrules:\n  - id: payment-processing\n    \
                        match: { biz: PAYMENT, code: PAY_PROCESSING }\n    retry:\n";

    #[test]
    fn a_key_one_column_short_of_its_siblings_is_told_their_column() {
        // libyaml names the rule's mapping (column 5); 'backoff' belongs with 'max_retries'.
        let text = format!("{RULE}      max_retries: 3\n     backoff: {{ fixed: 100ms }}\n");
        assert_eq!(
            only_error(&text),
            "7:6: 'backoff' at line 7 column 6 is indented less than 'max_retries' above it \
             (column 7) but deeper than 'retry' (column 5); line it up with column 7"
        );
        // A key of the rule, one column too deep: the rule's column is the one that reads.
        let text = format!("{RULE}      max_retries: 3\n     dead_letter: L1\n");
        assert_eq!(
            only_error(&text),
            "7:6: 'dead_letter' at line 7 column 6 is indented less than 'max_retries' above \
             it (column 7) but deeper than 'retry' (column 5); line it up with column 5"
        );
        // Below a nested mapping, the shallowest keys deeper than the line are its siblings.
        let text = format!(
            "{RULE}      max_retries: 3\n      backoff:\n        fixed: 1s\n     max_elapsed: 1h\n"
        );
        assert_eq!(
            only_error(&text),
            "9:6: 'max_elapsed' at line 9 column 6 is indented less than 'backoff' above it \
             (column 7) but deeper than 'retry' (column 5); line it up with column 7"
        );
        let defaults = "version: 1\ndefaults:\n  retry:\n    max_retries: 3\n   backoff: \
                        { fixed: 1s }\n  dead_letter: L2\n";
        assert_eq!(
            only_error(defaults),
            "5:4: 'backoff' at line 5 column 4 is indented less than 'max_retries' above it \
             (column 5) but deeper than 'retry' (column 3); line it up with column 5"
        );
    }

    #[test]
    fn a_key_folded_into_the_value_above_is_named_instead_of_the_values_type() {
        // serde alone says: invalid type: string "5 backoff", expected u32, at the 5.
        let text = format!("{RULE}      max_retries: 5\n       backoff: {{ fixed: 100ms }}\n");
        assert_eq!(
            only_error(&text),
            "7:8: 'backoff' at line 7 column 8 is indented deeper than 'max_retries' above \
             it, so YAML reads it as part of that value; line it up with column 7"
        );
        // Two columns deep, in the defaults.
        let defaults = "version: 1\ndefaults:\n  retry:\n    max_retries: 3\n      backoff: \
                        { fixed: 1s }\n";
        assert_eq!(
            only_error(defaults),
            "5:7: 'backoff' at line 5 column 7 is indented deeper than 'max_retries' above \
             it, so YAML reads it as part of that value; line it up with column 5"
        );
    }

    #[test]
    fn a_key_folded_into_a_value_that_takes_any_text_is_named_too() {
        // A string or a duration takes "L1 give_up"; libyaml then stops at the colon.
        let text =
            format!("{RULE}      max_retries: 5\n    dead_letter: L1\n       give_up: true\n");
        assert_eq!(
            only_error(&text),
            "8:8: 'give_up' at line 8 column 8 is indented deeper than 'dead_letter' above \
             it, so YAML reads it as part of that value; line it up with column 5"
        );
        let text = format!("{RULE}      max_elapsed: 1h\n        max_retries: 3\n");
        assert_eq!(
            only_error(&text),
            "7:9: 'max_retries' at line 7 column 9 is indented deeper than 'max_elapsed' \
             above it, so YAML reads it as part of that value; line it up with column 7"
        );
        // After a value that rightly goes on over two lines.
        let text = "version: 1\nrules:\n  - id: a\n    description: polls the gateway\n      \
                    until it answers\n      give_up: true\n";
        assert_eq!(
            only_error(text),
            "6:7: 'give_up' at line 6 column 7 is indented deeper than 'description' above \
             it, so YAML reads it as part of that value; line it up with column 5"
        );
    }

    #[test]
    fn a_value_over_two_lines_is_no_fold_when_nothing_in_it_looks_like_a_key() {
        let text = "version: 1\nrules:\n  - id: a\n    description: polls the gateway\n      \
                    until it answers\n    mach: X\n";
        assert!(
            only_error(text).starts_with("6:5: unknown field 'mach'"),
            "{}",
            only_error(text)
        );
    }

    #[test]
    fn a_misaligned_key_of_a_list_item_is_told_the_items_column() {
        let item = "version: 1\nrules:\n  - id: payment-failed\n    match: { biz: PAYMENT }\n";
        assert_eq!(
            only_error(&format!("{item}     give_up: true\n")),
            "5:6: 'give_up' at line 5 column 6 is indented deeper than 'match' above it \
             (column 5); line it up with column 5"
        );
        assert_eq!(
            only_error(&format!("{item}   give_up: true\n")),
            "5:4: 'give_up' at line 5 column 4 is indented less than 'match' above it (column \
             5) but deeper than the list's items ('- ', column 3); line it up with column 5, or \
             start a new item with '- ' at column 3"
        );
        // A quoted key is left to the plainer words, with the column still named.
        assert_eq!(
            only_error(&format!("{item}     \"give_up\": true\n")),
            "5:6: this line is indented to column 6, deeper than the keys of the mapping at \
             line 3 (column 5); line it up with column 5"
        );
        // At the items' own column, without a '- '.
        assert_eq!(
            only_error(&format!("{item}  give_up: true\n")),
            "5:3: 'give_up' at line 5 column 3 stands at the column of the list's items ('- ', \
             column 3) but starts none; line it up with 'match' above it (column 5), or put \
             '- ' before it to start a new item"
        );
        // The item's first key, after '- ', is the one out of line.
        let text = "version: 1\nrules:\n  -  id: a\n    give_up: true\n";
        assert_eq!(
            only_error(text),
            "4:5: 'give_up' at line 4 column 5 is indented less than 'id' above it (column 6) \
             but deeper than the list's items ('- ', column 3); line it up with column 6, or \
             start a new item with '- ' at column 3"
        );
    }

    #[test]
    fn a_line_of_block_text_indented_less_than_the_first_is_told_its_column() {
        let rule = "version: 1\nrules:\n  - id: panic\n    description: >\n       a bolt \
                    crashed on this message;\n";
        // YAML ends the text at the shallower line, and reads that as a key without ':'.
        assert_eq!(
            only_error(&format!(
                "{rule}      then it goes to its owners\n    give_up: true\n"
            )),
            "6:7: this line is indented to column 7, less than the text of 'description' above \
             it (column 8), so YAML ends that text before it; line it up with column 8"
        );
        assert_eq!(
            only_error(&format!(
                "{rule}    then it goes to its owners\n    give_up: true\n"
            )),
            "6:5: this line is indented to column 5, less than the text of 'description' above \
             it (column 8), so YAML ends that text before it; line it up with column 8"
        );
        // Text no deeper than its key is no text at all.
        let text = "version: 1\nrules:\n  - id: panic\n    description: >\n    a bolt \
                    crashed\n    give_up: true\n";
        assert_eq!(
            only_error(text),
            "5:5: this line is indented to column 5, no deeper than 'description' above it \
             (column 5), so YAML reads it as a key, not as the text that 'description' starts \
             at line 4; indent it to column 7"
        );
    }
}
