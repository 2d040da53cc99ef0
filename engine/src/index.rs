//! The decision tree's first levels: rules indexed by `biz`, then by `code`.
//!
//! A rule whose `biz` lists only exact names is filed under each of them; any other `biz`
//! (a glob, or no condition) files it under "any biz". Within each, its `code` files it by
//! exact name, by a glob's literal prefix (`DB_LOCK*` under `DB_LOCK`) or suffix
//! (`*_TIMEOUT` under `_TIMEOUT`), or under "any code". A failure then probes its biz (and
//! "any biz"), and in each its exact code, each prefix and suffix length that some glob has,
//! and "any code". Every bucket keeps rule numbers ascending and [`Candidates`] merges them,
//! so the first rule that matches is the first in file order, exactly as a linear scan finds
//! it, after looking at a handful of candidates instead of every rule.

use crate::pattern::{NameMatcher, NamePattern};
use crate::rule::CompiledRule;
use std::collections::HashMap;

type Map<V> = HashMap<Box<str>, V, foldhash::fast::RandomState>;

/// Prefix or suffix lengths probed per lookup; globs with rarer lengths go to "any".
const MAX_AFFIX_LENGTHS: usize = 3;
/// Buckets one lookup can collect: two biz levels of exact, affixes and any.
const MAX_LISTS: usize = 2 * (2 + 2 * MAX_AFFIX_LENGTHS);

/// Rule numbers indexed by biz and code.
#[derive(Debug, Default)]
pub struct RuleIndex {
    by_biz: Map<NameIndex>,
    any_biz: NameIndex,
}

/// Rule numbers indexed by one name (the code).
#[derive(Debug, Default)]
struct NameIndex {
    exact: Map<Vec<u32>>,
    prefix: Affixes,
    suffix: Affixes,
    any: Vec<u32>,
}

/// Globs filed by a literal prefix or suffix, and the lengths to probe.
#[derive(Debug, Default)]
struct Affixes {
    by: Map<Vec<u32>>,
    lengths: Vec<usize>,
    /// The outer bytes (first of a prefix, last of a suffix) of every key: a name whose
    /// outer byte is not here cannot match, and skips the probes.
    outer: ByteSet,
}

/// A set of bytes, one bit each.
#[derive(Debug, Default, Clone, Copy)]
struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }

    fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }
}

fn file(bucket: &mut Vec<u32>, n: u32) {
    if bucket.last() != Some(&n) {
        bucket.push(n);
    }
}

impl NameIndex {
    fn insert(&mut self, matcher: Option<&NameMatcher>, n: u32) {
        let Some(m) = matcher.filter(|m| !m.is_catch_all()) else {
            return file(&mut self.any, n);
        };
        for pattern in m.patterns() {
            match pattern {
                NamePattern::Exact(name) => file(self.exact.entry(name.clone()).or_default(), n),
                NamePattern::Glob(glob) => {
                    let (prefix, suffix) = glob.affixes();
                    if !prefix.is_empty() {
                        file(self.prefix.by.entry(prefix.into()).or_default(), n);
                    } else if !suffix.is_empty() {
                        file(self.suffix.by.entry(suffix.into()).or_default(), n);
                    } else {
                        file(&mut self.any, n);
                    }
                }
            }
        }
    }

    /// Keeps the most common affix lengths; globs of other lengths move to "any".
    fn finish(&mut self) {
        for affixes in [&mut self.prefix, &mut self.suffix] {
            let mut counts: HashMap<usize, usize> = HashMap::new();
            for (key, rules) in &affixes.by {
                *counts.entry(key.len()).or_default() += rules.len();
            }
            let mut lengths: Vec<(usize, usize)> = counts.into_iter().collect();
            lengths.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let keep: Vec<usize> = lengths
                .iter()
                .take(MAX_AFFIX_LENGTHS)
                .map(|l| l.0)
                .collect();
            let moved: Vec<Box<str>> = affixes
                .by
                .keys()
                .filter(|k| !keep.contains(&k.len()))
                .cloned()
                .collect();
            for key in moved {
                if let Some(rules) = affixes.by.remove(&key) {
                    self.any.extend(rules);
                }
            }
            affixes.lengths = keep;
        }
        for key in self.prefix.by.keys() {
            self.prefix.outer.insert(key.as_bytes()[0]);
        }
        for key in self.suffix.by.keys() {
            self.suffix.outer.insert(key.as_bytes()[key.len() - 1]);
        }
        self.any.sort_unstable();
        self.any.dedup();
    }

    fn collect<'a>(&'a self, code: &str, lists: &mut Lists<'a>) {
        if let Some(rules) = self.exact.get(code) {
            lists.push(rules);
        }
        let bytes = code.as_bytes();
        let prefixes = match bytes.first() {
            Some(&b) if self.prefix.outer.contains(b) => self.prefix.lengths.as_slice(),
            _ => &[],
        };
        let suffixes = match bytes.last() {
            Some(&b) if self.suffix.outer.contains(b) => self.suffix.lengths.as_slice(),
            _ => &[],
        };
        for &len in prefixes {
            if let Some(key) = code.get(..len)
                && let Some(rules) = self.prefix.by.get(key)
            {
                lists.push(rules);
            }
        }
        for &len in suffixes {
            if let Some(key) = code.len().checked_sub(len).and_then(|at| code.get(at..))
                && let Some(rules) = self.suffix.by.get(key)
            {
                lists.push(rules);
            }
        }
        lists.push(&self.any);
    }
}

impl RuleIndex {
    /// Files every rule; `rules` are in first-match order.
    pub fn build(rules: &[CompiledRule]) -> RuleIndex {
        let mut index = RuleIndex::default();
        for (n, rule) in rules.iter().enumerate() {
            let n = u32::try_from(n).expect("fewer than 2^32 rules");
            let code = rule.conditions.code.as_ref();
            match rule
                .conditions
                .biz
                .as_ref()
                .and_then(NameMatcher::exact_names)
            {
                Some(bizs) => {
                    for biz in bizs {
                        index.by_biz.entry(biz.into()).or_default().insert(code, n);
                    }
                }
                None => index.any_biz.insert(code, n),
            }
        }
        for names in index.by_biz.values_mut() {
            names.finish();
        }
        index.any_biz.finish();
        index
    }

    /// The rules that could decide `(biz, code)`, in first-match order.
    pub fn candidates(&self, biz: &str, code: &str) -> Candidates<'_> {
        let mut lists = Lists::default();
        if let Some(names) = self.by_biz.get(biz) {
            names.collect(code, &mut lists);
        }
        self.any_biz.collect(code, &mut lists);
        Candidates { lists }
    }
}

/// Up to [`MAX_LISTS`] non-empty ascending lists, without allocating.
#[derive(Debug, Clone, Default)]
struct Lists<'a> {
    items: [&'a [u32]; MAX_LISTS],
    len: usize,
}

impl<'a> Lists<'a> {
    fn push(&mut self, list: &'a [u32]) {
        debug_assert!(self.len < MAX_LISTS, "more buckets than a lookup can probe");
        if !list.is_empty() && self.len < MAX_LISTS {
            self.items[self.len] = list;
            self.len += 1;
        }
    }
}

/// A merge of ascending lists of rule numbers: the candidates in first-match order.
#[derive(Debug, Clone)]
pub struct Candidates<'a> {
    lists: Lists<'a>,
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let lists = &mut self.lists.items[..self.lists.len];
        if let [only] = lists {
            // One bucket (the common case): no merge needed.
            let (&head, rest) = only.split_first()?;
            *only = rest;
            return Some(head as usize);
        }
        let mut best: Option<(usize, u32)> = None;
        for (i, list) in lists.iter().enumerate() {
            if let Some(&head) = list.first()
                && best.is_none_or(|(_, b)| head < b)
            {
                best = Some((i, head));
            }
        }
        let (i, head) = best?;
        // Drop the head from every list that has it (a rule can sit in two buckets).
        for list in lists.iter_mut() {
            if list.first() == Some(&head) {
                *list = &list[1..];
            }
        }
        debug_assert!(lists[i].first() != Some(&head));
        Some(head as usize)
    }
}
