//! Mutations of a rule file's bytes: flips, inserted marks and control characters, line
//! edits, swapped keys, and values replaced by generated ones.

use crate::generate;
use rand::RngExt;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;

/// Keys of the rule-file model, for swapping one for another.
const KEYS: &[&str] = &[
    "version",
    "defaults",
    "rules",
    "id",
    "description",
    "match",
    "if",
    "retry",
    "give_up",
    "dead_letter",
    "biz",
    "code",
    "attempt",
    "elapsed",
    "attrs",
    "max_retries",
    "max_elapsed",
    "backoff",
    "respect_retry_after",
    "fixed",
    "linear",
    "exponential",
    "schedule",
    "script",
    "jitter",
    "base",
    "step",
    "factor",
    "max",
];

/// Characters that parsers treat specially.
const PIECES: &[&str] = &[
    "\u{feff}",
    "\t",
    "\0",
    "\r",
    "\r\n",
    "\n",
    " ",
    "#",
    ":",
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "'",
    "\"",
    "&a ",
    "*a",
    "!!str ",
    "---\n",
    "...\n",
    "\u{2028}",
    "\u{85}",
    "\\",
    "|",
    ">",
    "%YAML 1.2\n",
    "? ",
    "\u{7f}",
    "\u{fffd}",
    "é",
    "\u{200b}",
];

/// Applies one to four random mutations to `bytes`.
pub fn mutate(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..5) {
        once(rng, bytes);
    }
}

/// One mutation that keeps the file's shape: a value replaced, or a rule appended. Most
/// such files still load, so the checks behind the parser get exercised too.
pub fn mild(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    if rng.random_bool(0.7) {
        replace_value(rng, bytes);
    } else {
        let i = rng.random_range(0..50);
        bytes.extend_from_slice(generate::rule(rng, i).as_bytes());
    }
}

fn once(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    let len = bytes.len();
    match rng.random_range(0..16) {
        0 if len > 0 => {
            let at = rng.random_range(0..len);
            bytes[at] ^= 1 << rng.random_range(0..8);
        }
        1 if len > 0 => {
            let at = rng.random_range(0..len);
            bytes[at] = rng.random();
        }
        2 | 3 => {
            let piece = PIECES.choose(rng).unwrap();
            let at = place(rng, bytes);
            bytes.splice(at..at, piece.bytes());
        }
        4 => {
            // A byte-order mark at the start of a line, or of the file.
            let at = if rng.random_bool(0.3) {
                0
            } else {
                line_start(rng, bytes)
            };
            bytes.splice(at..at, "\u{feff}".bytes());
        }
        5 => *bytes = replace_all(bytes, b"\n", b"\r\n"),
        6 if len > 0 => bytes.truncate(rng.random_range(0..len)),
        7 => edit_lines(rng, bytes, |rng, lines| {
            let i = rng.random_range(0..lines.len());
            let line = lines[i].clone();
            lines.insert(i, line);
        }),
        8 => edit_lines(rng, bytes, |rng, lines| {
            let (a, b) = (
                rng.random_range(0..lines.len()),
                rng.random_range(0..lines.len()),
            );
            lines.swap(a, b);
        }),
        9 => edit_lines(rng, bytes, |rng, lines| {
            lines.remove(rng.random_range(0..lines.len()));
        }),
        10 => edit_lines(rng, bytes, |rng, lines| {
            // Indent or dedent a line.
            let i = rng.random_range(0..lines.len());
            if rng.random_bool(0.5) {
                lines[i].insert_str(0, ["  ", " ", "\t"].choose(rng).unwrap());
            } else if lines[i].starts_with(' ') {
                lines[i].remove(0);
            }
        }),
        11 => swap_key(rng, bytes),
        12 | 13 => replace_value(rng, bytes),
        14 => {
            // Another rule, appended (inside `rules:` when that is the last section).
            let i = rng.random_range(0..50);
            bytes.extend_from_slice(generate::rule(rng, i).as_bytes());
        }
        _ => {
            let at = place(rng, bytes);
            let nest = generate::nesting(rng);
            bytes.splice(at..at, nest.bytes());
        }
    }
}

/// A random insertion point, on a character boundary when the bytes are UTF-8 (mostly).
fn place(rng: &mut SmallRng, bytes: &[u8]) -> usize {
    let mut at = rng.random_range(0..=bytes.len());
    if let Ok(text) = std::str::from_utf8(bytes)
        && rng.random_bool(0.9)
    {
        while !text.is_char_boundary(at) {
            at -= 1;
        }
    }
    at
}

fn line_start(rng: &mut SmallRng, bytes: &[u8]) -> usize {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    *starts.choose(rng).unwrap()
}

fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// Edits the lines of a UTF-8 file (others are left alone).
fn edit_lines(
    rng: &mut SmallRng,
    bytes: &mut Vec<u8>,
    edit: impl FnOnce(&mut SmallRng, &mut Vec<String>),
) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    edit(rng, &mut lines);
    *bytes = lines.join("\n").into_bytes();
}

/// One occurrence of a model key replaced by another key.
fn swap_key(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let from = KEYS.choose(rng).unwrap();
    let needle = format!("{from}:");
    let found: Vec<usize> = text.match_indices(&needle).map(|(i, _)| i).collect();
    let Some(&at) = found.choose(rng) else {
        return;
    };
    let to = KEYS.choose(rng).unwrap();
    let mut out = text[..at].to_string();
    out.push_str(to);
    out.push_str(&text[at + from.len()..]);
    *bytes = out.into_bytes();
}

/// The value after `key: ` on a random line replaced by a generated one.
fn replace_value(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    edit_lines(rng, bytes, |rng, lines| {
        let with_value: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains(": "))
            .collect();
        let Some(&i) = with_value.choose(rng) else {
            return;
        };
        let at = lines[i].find(": ").unwrap() + 2;
        let value = match rng.random_range(0..8) {
            0 => generate::duration(rng),
            1 => format!("\"{}\"", generate::glob(rng)),
            2 => {
                let durations = rng.random_bool(0.5);
                format!("\"{}\"", generate::comparison(rng, durations))
            }
            3 => generate::huge_number(rng),
            4 => generate::quoted(&generate::guard(rng)),
            5 => generate::quoted(&generate::script(rng)),
            6 => generate::nesting(rng),
            _ => format!("|\n      {}", generate::guard(rng)),
        };
        lines[i].truncate(at);
        lines[i].push_str(&value);
    });
}
