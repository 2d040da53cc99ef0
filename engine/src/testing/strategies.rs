//! proptest strategies for failures drawn from a loaded set: its names, attribute and header
//! values and signals ([`vocabulary`]), plus names it has never heard of.

use super::Failure;
use super::checks::max_retries;
use super::simulate::MAX_PATH_ATTEMPTS;
use crate::backoff::BackoffKind;
use crate::context::{Attrs, Signals};
use crate::pattern::{NameMatcher, NamePattern};
use crate::set::CompiledSet;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The names a set talks about: what its conditions and expressions mention.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    /// Business types in `match.biz` (a glob contributes names it matches).
    pub biz: Vec<String>,
    /// Error codes in `match.code` (likewise).
    pub codes: Vec<String>,
    /// Attribute names in `match.attrs`, each with the values its conditions mention.
    pub attrs: BTreeMap<String, Vec<String>>,
    /// Header names in `match.headers`, each with the values its conditions mention.
    pub headers: BTreeMap<String, Vec<String>>,
    /// Signal names that guards and delay scripts read (`signals.NAME`).
    pub signals: Vec<String>,
}

/// The vocabulary of `set`.
pub fn vocabulary(set: &CompiledSet) -> Vocabulary {
    let mut biz = BTreeSet::new();
    let mut codes = BTreeSet::new();
    let mut attrs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut headers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut signals = BTreeSet::new();
    for rule in &set.rules {
        let c = &rule.conditions;
        if let Some(m) = &c.biz {
            biz.extend(names_matching(m));
        }
        if let Some(m) = &c.code {
            codes.extend(names_matching(m));
        }
        for (named, into) in [(&c.attrs, &mut attrs), (&c.headers, &mut headers)] {
            for (name, m) in named {
                into.entry(name.clone())
                    .or_default()
                    .extend(names_matching(m));
            }
        }
        if let Some(guard) = &rule.guard {
            signals.extend(signal_names(guard.source()));
        }
        if let Some(p) = rule.policy()
            && let BackoffKind::Script(e) = &p.backoff.kind
        {
            signals.extend(signal_names(e.source()));
        }
    }
    Vocabulary {
        biz: biz.into_iter().collect(),
        codes: codes.into_iter().collect(),
        attrs: listed(attrs),
        headers: listed(headers),
        signals: signals.into_iter().collect(),
    }
}

fn listed(named: BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, Vec<String>> {
    named
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
        .collect()
}

/// Names a matcher matches: each exact name, and for a glob its shortest and a longer match.
fn names_matching(m: &NameMatcher) -> Vec<String> {
    let mut out = Vec::new();
    for p in m.patterns() {
        match p {
            NamePattern::Exact(name) => out.push(name.to_string()),
            NamePattern::Glob(g) if g.is_catch_all() => {}
            NamePattern::Glob(_) => {
                let source = p.to_string();
                out.push(source.replace('*', ""));
                out.push(source.replace('*', "_X"));
            }
        }
    }
    out
}

/// `NAME` for each `signals.NAME` or `signals["NAME"]` in a rhai expression.
fn signal_names(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("signals") {
        rest = &rest[at + "signals".len()..];
        let name: String = if let Some(r) = rest.strip_prefix('.') {
            r.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        } else if let Some(r) = rest.strip_prefix("[\"") {
            r.chars().take_while(|c| *c != '"').collect()
        } else {
            continue;
        };
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// A name from `known`, or now and then one the set has never heard of.
fn name_strategy(known: Vec<String>) -> BoxedStrategy<String> {
    let unknown = "UNKNOWN_[A-Z]{1,8}".boxed();
    if known.is_empty() {
        return prop_oneof![Just(String::new()), unknown].boxed();
    }
    prop_oneof![4 => prop::sample::select(known), 1 => unknown].boxed()
}

/// A map holding, or not, each name of `entries`, with a value drawn from the strategy it
/// comes with.
fn optional_entries_strategy<S>(
    entries: impl IntoIterator<Item = (String, S)>,
) -> BoxedStrategy<BTreeMap<String, S::Value>>
where
    S: Strategy + 'static,
{
    let entries: Vec<_> = entries
        .into_iter()
        .map(|(name, value)| {
            prop::option::of(value)
                .prop_map(move |v| v.map(|v| (name.clone(), v)))
                .boxed()
        })
        .collect();
    entries
        .prop_map(|list| list.into_iter().flatten().collect())
        .boxed()
}

/// A map holding, or not, each of `named`'s names, with a value from its list (or unknown).
fn string_map_strategy(named: &BTreeMap<String, Vec<String>>) -> BoxedStrategy<Attrs> {
    optional_entries_strategy(
        named
            .iter()
            .map(|(name, values)| (name.clone(), name_strategy(values.clone()))),
    )
}

/// Each of the vocabulary's signals, or not: mostly from 0 to 1, now and then up to 10,000.
fn signals_strategy(vocab: &Vocabulary) -> BoxedStrategy<Signals> {
    optional_entries_strategy(vocab.signals.iter().map(|name| {
        let value = prop_oneof![3 => 0.0..=1.0f64, 1 => 0.0..10_000.0f64];
        (name.clone(), value)
    }))
}

fn millis(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_millis)
}

/// When a failure happens: the epoch (the load-time sample's `now`) now and then, else any
/// millisecond from 2020 to 2040, so that every hour and weekday turns up.
fn now_strategy() -> BoxedStrategy<u64> {
    prop_oneof![1 => Just(0u64), 9 => 1_577_836_800_000..=2_208_988_800_000u64].boxed()
}

/// First failures (attempt 1, nothing elapsed) drawn from `set`: its biz types, codes,
/// attribute and header values and signals, plus unknown names; a `now` anywhere in two
/// decades; sometimes with a `retry_after`. The start of a path.
pub fn failures(set: &CompiledSet) -> BoxedStrategy<Failure> {
    let vocab = vocabulary(set);
    (
        name_strategy(vocab.biz.clone()),
        name_strategy(vocab.codes.clone()),
        prop::option::weighted(0.2, millis(0..=120_000)),
        string_map_strategy(&vocab.attrs),
        string_map_strategy(&vocab.headers),
        now_strategy(),
        signals_strategy(&vocab),
    )
        .prop_map(
            |(biz, code, retry_after, attrs, headers, now, signals)| Failure {
                biz,
                code,
                attempt: 1,
                redrives: 0,
                elapsed: Duration::ZERO,
                retry_after,
                last_delay: Duration::ZERO,
                attrs,
                headers,
                now,
                signals,
            },
        )
        .boxed()
}

/// Failures at any point of a path drawn from `set`: like [`failures`], with an attempt up to
/// two past the set's largest `max_retries`, up to a day elapsed and a previous delay.
pub fn failure_contexts(set: &CompiledSet) -> BoxedStrategy<Failure> {
    let top = max_retries(set).saturating_add(2).min(MAX_PATH_ATTEMPTS);
    (
        failures(set),
        1..=top,
        0..=3u32,
        millis(0..=86_400_000),
        millis(0..=600_000),
    )
        .prop_map(|(f, attempt, redrives, elapsed, last_delay)| Failure {
            attempt,
            redrives,
            elapsed,
            last_delay,
            ..f
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SourceFile, compile};

    fn set(yaml: &str) -> CompiledSet {
        compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap()
    }

    #[test]
    fn vocabulary_collects_names_globs_attrs_headers_and_signals() {
        let s = set(
            "version: 1\nrules:\n  - id: a\n    match: { biz: PAY, code: \"DB_*\", attrs: { tier: [gold, silver] }, headers: { tenant: \"vip-*\" } }\n    if: 'signals.fail_rate > 0.5 || signals[\"depth\"] > 3.0'\n",
        );
        let v = vocabulary(&s);
        assert_eq!(v.biz, ["PAY"]);
        assert_eq!(v.codes, ["DB_", "DB__X"]);
        assert_eq!(v.attrs["tier"], ["gold", "silver"]);
        assert_eq!(v.headers["tenant"], ["vip-", "vip-_X"]);
        assert_eq!(v.signals, ["depth", "fail_rate"]);
    }
}
