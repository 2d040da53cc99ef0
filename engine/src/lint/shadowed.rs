//! A rule that can never decide, because an earlier rule without `if` matches everything it
//! matches.
//!
//! The check is conservative: it warns only when coverage is certain. Names are covered by a
//! missing condition, by `*`, by patterns matching each exact name, or by the identical glob;
//! comparisons are compared at every point where either side can change its answer.

use super::{LintCx, LintRule};
use crate::diag::Diagnostic;
use crate::pattern::{Cmp, Glob, NameMatcher, NamePattern};
use crate::rule::{CompiledRule, Conditions};
use std::time::Duration;

pub(crate) struct Shadowed;

/// A name no exact condition can have, to look up only the wildcard buckets.
const NO_NAME: &str = "\u{0}*";

impl LintRule for Shadowed {
    fn check(&self, cx: &LintCx<'_>, out: &mut Vec<Diagnostic>) {
        let index = cx.index;
        for (b, later) in cx.rules.iter().enumerate() {
            let biz = representative(later.conditions.biz.as_ref());
            let code = representative(later.conditions.code.as_ref());
            // Any rule covering `later` also matches its representative names.
            let shadow = index
                .candidates(&biz, &code)
                .map(|c| c.rule)
                .take_while(|&a| a < b)
                .map(|a| &cx.rules[a])
                .find(|earlier| {
                    earlier.guard.is_none() && covers(&earlier.conditions, &later.conditions)
                });
            if let Some(earlier) = shadow {
                out.push(warning(earlier, later));
            }
        }
    }
}

fn warning(earlier: &CompiledRule, later: &CompiledRule) -> Diagnostic {
    let at = earlier.pos.map_or(earlier.file.to_string(), |p| {
        format!("{}:{p}", earlier.file)
    });
    Diagnostic::warning(
        &*later.file,
        later.pos,
        format!(
            "rule '{}' can never decide: the earlier rule '{}' ({at}) has no 'if' and matches everything it matches",
            later.id, earlier.id
        ),
    )
}

/// A name every rule covering `m` must match: its first pattern with the stars removed
/// (a member of that glob's names), or a name no condition has when `m` is absent.
fn representative(m: Option<&NameMatcher>) -> String {
    match m.and_then(|m| m.patterns().first()) {
        Some(p) => p.to_string().replace('*', ""),
        None => NO_NAME.to_string(),
    }
}

/// Whether every failure matching `b` also matches `a`.
pub(crate) fn covers(a: &Conditions, b: &Conditions) -> bool {
    names_cover(a.biz.as_ref(), b.biz.as_ref())
        && names_cover(a.code.as_ref(), b.code.as_ref())
        && cmps_cover(
            &a.attempt,
            &b.attempt,
            |c| c.value,
            |v| v.saturating_sub(1),
            |v| v.saturating_add(1),
        )
        && cmps_cover(
            &a.elapsed,
            &b.elapsed,
            |c| c.value,
            |v| v.saturating_sub(Duration::from_millis(1)),
            |v| v.saturating_add(Duration::from_millis(1)),
        )
        && named_cover(&a.attrs, &b.attrs)
        && named_cover(&a.headers, &b.headers)
}

/// Whether each of `a`'s named conditions (attrs or headers) covers one of `b`'s of that name:
/// `b` then requires the name present, with values `a` takes.
fn named_cover(a: &[(String, NameMatcher)], b: &[(String, NameMatcher)]) -> bool {
    a.iter().all(|(name, am)| {
        b.iter()
            .any(|(bn, bm)| bn == name && names_cover(Some(am), Some(bm)))
    })
}

fn names_cover(a: Option<&NameMatcher>, b: Option<&NameMatcher>) -> bool {
    let Some(a) = a else { return true };
    if a.is_catch_all() {
        return true;
    }
    let Some(b) = b else { return false };
    b.patterns().iter().all(|p| match p {
        NamePattern::Exact(name) => a.matches(name),
        NamePattern::Glob(glob) => a.patterns().iter().any(|q| glob_covers(q, glob)),
    })
}

/// Whether every name glob `b` matches is matched by `a`.
///
/// Exactly when `a` matches `b`'s text with each of `b`'s stars taken as a character only a
/// star of `a` can match; and a literal of `a` is never `*`, so plain matching does it:
/// `DB_*` covers `DB_LOCK*`, `*_WAIT` covers `DB_*_WAIT`, `DB_LOCK*` does not cover `DB_*`.
fn glob_covers(a: &NamePattern, b: &Glob) -> bool {
    matches!(a, NamePattern::Glob(_)) && a.matches(b.source())
}

/// Whether every value satisfying all of `b` satisfies all of `a`, checked at each constant
/// of either side and its neighbours: between those points neither side changes its answer.
fn cmps_cover<T: Ord + Copy + Default>(
    a: &[Cmp<T>],
    b: &[Cmp<T>],
    value: impl Fn(&Cmp<T>) -> T,
    below: impl Fn(T) -> T,
    above: impl Fn(T) -> T,
) -> bool {
    if a.is_empty() {
        return true;
    }
    let mut points = vec![T::default()];
    for c in a.iter().chain(b) {
        let v = value(c);
        points.extend([below(v), v, above(v)]);
    }
    points
        .into_iter()
        .all(|p| !b.iter().all(|c| c.holds(p)) || a.iter().all(|c| c.holds(p)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn glob(s: &str) -> NamePattern {
        NamePattern::parse(s).unwrap()
    }

    fn covers(a: &str, b: &str) -> bool {
        match glob(b) {
            NamePattern::Glob(g) => glob_covers(&glob(a), &g),
            NamePattern::Exact(_) => panic!("{b} is not a glob"),
        }
    }

    /// The ids of the rules `yaml`'s set warns can never decide.
    fn shadowed(yaml: &str) -> Vec<String> {
        let set = crate::compile(vec![crate::SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
        set.warnings()
            .iter()
            .filter(|w| w.message.contains("can never decide"))
            .map(|w| w.message.split('\'').nth(1).unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn a_header_condition_shadows_only_rules_that_need_the_header_too() {
        let rules = |a: &str, b: &str| {
            format!(
                "version: 1\nrules:\n  - id: a\n    match: {a}\n    give_up: true\n  - id: b\n    match: {b}\n    give_up: true\n"
            )
        };
        let wide = "{ headers: { tenant: \"*\" } }";
        let vip = "{ headers: { tenant: vip }, code: X }";
        assert_eq!(shadowed(&rules(wide, vip)), ["b"]);
        // A header is not an attribute, and a message without the header escapes `a`.
        assert!(shadowed(&rules(wide, "{ attrs: { tenant: vip } }")).is_empty());
        assert!(shadowed(&rules(wide, "{ code: X }")).is_empty());
        assert_eq!(shadowed(&rules("{ code: X }", vip)), ["b"]);
    }

    #[test]
    fn globs_cover_the_globs_they_contain() {
        assert!(covers("DB_*", "DB_LOCK*"));
        assert!(covers("*", "A*B"));
        assert!(covers("*_WAIT", "DB_*_WAIT"));
        assert!(covers("A*B", "A*X*B"));
        assert!(covers("A*", "A*"));
        assert!(!covers("DB_LOCK*", "DB_*"));
        assert!(!covers("NET*", "*NET*"));
        assert!(!covers("A*B", "A*"));
        assert!(!covers("EXACT", "EXACT*"));
    }

    proptest! {
        /// Soundness of the lint: when `a` covers glob `b`, every name `b` matches, `a`
        /// matches too (names built from `b` by filling its stars).
        #[test]
        fn a_covering_glob_matches_every_name_of_the_covered_one(
            a in "[AB*]{0,5}",
            b in "[AB]{0,2}\\*[AB*]{0,4}",
            fills in proptest::collection::vec("[AB]{0,3}", 6),
        ) {
            prop_assume!(a.contains('*'));
            let NamePattern::Glob(gb) = glob(&b) else { unreachable!() };
            if glob_covers(&glob(&a), &gb) {
                let mut fill = fills.iter();
                let name: String = b
                    .split('*')
                    .enumerate()
                    .map(|(i, piece)| {
                        let star = if i == 0 { "" } else { fill.next().map_or("", String::as_str) };
                        format!("{star}{piece}")
                    })
                    .collect();
                prop_assert!(glob(&a).matches(&name), "{a} covers {b} but not {name}");
            }
        }
    }
}
