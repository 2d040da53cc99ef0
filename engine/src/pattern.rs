//! The structured conditions of `match:`: names with globs, and comparisons on attempt and
//! elapsed time. Parsing lives here too, returning a reason the loader turns into a diagnostic.

use crate::duration::{DurationDisplay, parse_duration};
use std::fmt;
use std::time::Duration;

/// One name pattern: an exact name, or a glob whose `*` matches any run of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NamePattern {
    /// Matches exactly this name (case-sensitive).
    Exact(Box<str>),
    /// Matches names of this shape.
    Glob(Glob),
}

/// A glob with `*` only: the literal pieces between the stars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob {
    source: Box<str>,
    /// The literal pieces; there is a `*` between each two of them.
    pieces: Vec<Box<str>>,
}

impl Glob {
    /// Whether `name` has this glob's shape.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let (first, rest) = match self.pieces.split_first() {
            Some(split) => split,
            None => return true,
        };
        // Empty pieces (a leading or trailing `*`) are skipped rather than compared: the
        // empty comparisons went through libc's memcmp on a slow path, and made a glob
        // decision cost 2.5 times what it does without them (`cargo bench --bench decide`).
        let mut tail = name;
        if !first.is_empty() {
            let Some(after) = name.strip_prefix(&**first) else {
                return false;
            };
            tail = after;
        }
        let Some((last, middle)) = rest.split_last() else {
            return tail.is_empty(); // no star at all: cannot happen for a Glob, kept for safety
        };
        for piece in middle {
            match tail.find(&**piece) {
                Some(at) => tail = &tail[at + piece.len()..],
                None => return false,
            }
        }
        last.is_empty() || (tail.len() >= last.len() && tail.ends_with(&**last))
    }

    /// The literal text before the first `*` and after the last one.
    pub(crate) fn affixes(&self) -> (&str, &str) {
        let first = self.pieces.first().map_or("", |p| &**p);
        let last = self.pieces.last().map_or("", |p| &**p);
        (first, last)
    }

    /// The glob as written, e.g. `DB_LOCK*`.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// True for `*`, which matches every name.
    pub(crate) fn is_catch_all(&self) -> bool {
        self.pieces.iter().all(|p| p.is_empty())
    }
}

impl NamePattern {
    /// Parses `NAME` or a glob such as `PAY*`; only `*` is special.
    pub(crate) fn parse(text: &str) -> Result<NamePattern, String> {
        if let Some(bad) = text
            .chars()
            .find(|c| matches!(c, '?' | '[' | ']' | '{' | '}'))
        {
            return Err(format!(
                "bad glob '{text}': '{bad}' is not supported; only '*' (any run of characters) is"
            ));
        }
        if !text.contains('*') {
            return Ok(NamePattern::Exact(text.into()));
        }
        let pieces = text.split('*').map(Into::into).collect();
        Ok(NamePattern::Glob(Glob {
            source: text.into(),
            pieces,
        }))
    }

    /// Whether `name` matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        match self {
            NamePattern::Exact(exact) => **exact == *name,
            NamePattern::Glob(glob) => glob.matches(name),
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamePattern::Exact(name) => f.write_str(name),
            NamePattern::Glob(glob) => f.write_str(&glob.source),
        }
    }
}

/// A name condition: matches when any of its patterns does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameMatcher {
    patterns: Vec<NamePattern>,
}

impl NameMatcher {
    /// A matcher from its patterns (a list in YAML, or a single one).
    pub(crate) fn new(patterns: Vec<NamePattern>) -> Self {
        NameMatcher { patterns }
    }

    /// Whether `name` matches any pattern.
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| p.matches(name))
    }

    /// The exact names, when every pattern is exact (these conditions can be indexed).
    pub(crate) fn exact_names(&self) -> Option<Vec<&str>> {
        self.patterns
            .iter()
            .map(|p| match p {
                NamePattern::Exact(name) => Some(&**name),
                NamePattern::Glob(_) => None,
            })
            .collect()
    }

    /// True when some pattern is `*`.
    pub(crate) fn is_catch_all(&self) -> bool {
        self.patterns
            .iter()
            .any(|p| matches!(p, NamePattern::Glob(g) if g.is_catch_all()))
    }

    /// The patterns.
    pub(crate) fn patterns(&self) -> &[NamePattern] {
        &self.patterns
    }
}

impl fmt::Display for NameMatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [one] = self.patterns.as_slice() {
            return write!(f, "{one}");
        }
        f.write_str("[")?;
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}")?;
        }
        f.write_str("]")
    }
}

/// A comparison operator of `attempt` and `elapsed` conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    /// Applies the operator.
    pub(crate) fn holds<T: Ord>(self, left: T, right: T) -> bool {
        match self {
            Op::Lt => left < right,
            Op::Le => left <= right,
            Op::Gt => left > right,
            Op::Ge => left >= right,
            Op::Eq => left == right,
            Op::Ne => left != right,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

/// `OP VALUE`: a comparison against a number or a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cmp<T> {
    /// The operator.
    pub op: Op,
    /// The right-hand side.
    pub value: T,
}

impl<T: Ord + Copy> Cmp<T> {
    /// Whether `left OP value` holds.
    pub(crate) fn holds(&self, left: T) -> bool {
        self.op.holds(left, self.value)
    }
}

impl fmt::Display for Cmp<u64> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op.symbol(), self.value)
    }
}

impl fmt::Display for Cmp<Duration> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op.symbol(), DurationDisplay(self.value))
    }
}

const OP_HELP: &str = "expected 'OP VALUE' where OP is one of <, <=, >, >=, ==, !=";

/// Splits `">= 5"` into the operator and the rest.
fn split_op(text: &str) -> Option<(Op, &str)> {
    let t = text.trim_start();
    // Two-character operators first so `<=` is not read as `<`.
    for (sym, op) in [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ] {
        if let Some(rest) = t.strip_prefix(sym) {
            return Some((op, rest.trim()));
        }
    }
    None
}

/// Parses a count's comparison (`attempt`, `redrives`): `">= 5"`, or a bare number meaning
/// equality; `what` names the count in the error (`an attempt number`).
pub(crate) fn parse_count_cmp(text: &str, what: &str) -> Result<Cmp<u64>, String> {
    let (op, rest) = match split_op(text) {
        Some(split) => split,
        None => (Op::Eq, text.trim()),
    };
    let value = rest
        .parse::<u64>()
        .map_err(|_| format!("bad comparison '{text}': {OP_HELP} and VALUE {what}"))?;
    Ok(Cmp { op, value })
}

/// Parses an elapsed comparison: `"> 30s"`.
pub(crate) fn parse_elapsed_cmp(text: &str) -> Result<Cmp<Duration>, String> {
    let (op, rest) = split_op(text)
        .ok_or_else(|| format!("bad comparison '{text}': {OP_HELP} and VALUE a duration"))?;
    let value = parse_duration(rest).map_err(|e| format!("bad comparison '{text}': {e}"))?;
    Ok(Cmp { op, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(s: &str) -> NamePattern {
        NamePattern::parse(s).unwrap()
    }

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob("PAY*").matches("PAYMENT"));
        assert!(glob("PAY*").matches("PAY"));
        assert!(!glob("PAY*").matches("XPAY"));
        assert!(glob("*").matches(""));
        assert!(glob("*_WAIT").matches("DB_LOCK_WAIT"));
        assert!(glob("DB*WAIT").matches("DB_LOCK_WAIT"));
        assert!(glob("A*A").matches("AA"));
        assert!(!glob("A*A").matches("A"));
        assert!(glob("*A*B*").matches("xxAyyBzz"));
        assert!(!glob("*A*B*").matches("xxByyAzz"));
        assert!(glob("EXACT").matches("EXACT"));
        assert!(!glob("EXACT").matches("exact"));
    }

    #[test]
    fn unsupported_glob_syntax_is_an_error() {
        assert!(NamePattern::parse("PAY?").unwrap_err().contains("only '*'"));
        assert!(NamePattern::parse("[AB]").is_err());
    }

    #[test]
    fn comparisons_parse_every_operator() {
        assert_eq!(
            parse_count_cmp(">= 5", "an attempt number").unwrap(),
            Cmp {
                op: Op::Ge,
                value: 5
            }
        );
        assert_eq!(
            parse_count_cmp("<3", "an attempt number").unwrap(),
            Cmp {
                op: Op::Lt,
                value: 3
            }
        );
        assert_eq!(
            parse_count_cmp("7", "an attempt number").unwrap(),
            Cmp {
                op: Op::Eq,
                value: 7
            }
        );
        assert_eq!(
            parse_count_cmp("!= 2", "an attempt number").unwrap().op,
            Op::Ne
        );
        assert!(parse_count_cmp("=> 5", "an attempt number").is_err());
        assert!(parse_count_cmp(">= five", "an attempt number").is_err());
        let e = parse_elapsed_cmp("> 30s").unwrap();
        assert!(e.holds(Duration::from_secs(31)) && !e.holds(Duration::from_secs(30)));
        assert!(parse_elapsed_cmp("30s").is_err());
        assert!(parse_elapsed_cmp("> 30 parsecs").is_err());
    }
}
