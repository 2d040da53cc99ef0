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
//!
//! On top sits the fast path for the structured rules a set is mostly made of: for every
//! exact `(biz, code)` pair that some rule names, the merged candidate list is computed at
//! build time, keeping only the rules whose `biz` and `code` match that pair. A failure of
//! such a pair costs two hashes, one probe and a walk down a short list, without comparing
//! names again. Pairs whose list would be long (many wildcard rules) are left to the merge.

use crate::pattern::{NameMatcher, NamePattern};
use crate::rule::CompiledRule;
use hashbrown::HashTable;
use std::collections::HashMap;
use std::hash::BuildHasher;

type Map<V> = HashMap<Box<str>, V, foldhash::fast::RandomState>;
type Hasher = foldhash::fast::RandomState;

/// Prefix or suffix lengths probed per lookup; globs with rarer lengths go to "any".
const MAX_AFFIX_LENGTHS: usize = 3;
/// Buckets one lookup can collect: two biz levels of exact, affixes and any.
const MAX_LISTS: usize = 2 * (2 + 2 * MAX_AFFIX_LENGTHS);
/// The longest merged list kept for an exact pair; longer ones are merged per lookup.
const MAX_PAIR_CANDIDATES: usize = 64;

/// Rule numbers indexed by biz and code.
#[derive(Debug, Default)]
pub(crate) struct RuleIndex {
    /// Hashes every exact name, so that a lookup hashes its code once for both biz levels.
    hasher: Hasher,
    by_biz: Names<NameIndex>,
    any_biz: NameIndex,
    /// The merged candidates of every exact `(biz, code)` pair a rule names.
    pairs: HashTable<Pair>,
}

/// The candidates of one exact `(biz, code)` pair, merged at build time: the rules whose
/// `biz` and `code` conditions match the pair, in first-match order.
#[derive(Debug)]
struct Pair {
    biz: Box<str>,
    code: Box<str>,
    rules: Box<[u32]>,
}

/// The hash of a pair from the hashes of its names.
fn pair_hash(biz: u64, code: u64) -> u64 {
    biz.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31) ^ code
}

/// Values keyed by exact name, probed with a hash the caller computed with the index's
/// [`Hasher`].
#[derive(Debug, Default)]
struct Names<V> {
    table: HashTable<(Box<str>, V)>,
}

impl<V: Default> Names<V> {
    fn get(&self, hash: u64, name: &str) -> Option<&V> {
        self.table.find(hash, |(k, _)| **k == *name).map(|(_, v)| v)
    }

    fn entry(&mut self, hasher: &Hasher, name: &str) -> &mut V {
        let hash = hasher.hash_one(name);
        let entry = self
            .table
            .entry(hash, |(k, _)| **k == *name, |(k, _)| hasher.hash_one(&**k))
            .or_insert_with(|| (name.into(), V::default()));
        &mut entry.into_mut().1
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.table.iter_mut().map(|(_, v)| v)
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.table.iter().map(|(k, v)| (&**k, v))
    }
}

/// Rule numbers indexed by one name (the code).
#[derive(Debug, Default)]
struct NameIndex {
    exact: Names<Vec<u32>>,
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
    fn insert(&mut self, hasher: &Hasher, matcher: Option<&NameMatcher>, n: u32) {
        let Some(m) = matcher.filter(|m| !m.is_catch_all()) else {
            return file(&mut self.any, n);
        };
        for pattern in m.patterns() {
            match pattern {
                NamePattern::Exact(name) => file(self.exact.entry(hasher, name), n),
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

    /// Pushes the buckets `code` can hit; `hash` is the code's hash.
    fn collect<'a>(&'a self, code: &str, hash: u64, lists: &mut Lists<'a>) {
        if let Some(rules) = self.exact.get(hash, code) {
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
    pub(crate) fn build(rules: &[CompiledRule]) -> RuleIndex {
        let mut index = RuleIndex::default();
        let hasher = index.hasher.clone();
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
                        index.by_biz.entry(&hasher, biz).insert(&hasher, code, n);
                    }
                }
                None => index.any_biz.insert(&hasher, code, n),
            }
        }
        for names in index.by_biz.values_mut() {
            names.finish();
        }
        index.any_biz.finish();
        index.pairs = index.merge_pairs(rules);
        index
    }

    /// Merges the candidates of every exact pair once, for the fast path.
    fn merge_pairs(&self, all: &[CompiledRule]) -> HashTable<Pair> {
        let mut pairs = HashTable::new();
        for (biz, names) in self.by_biz.iter() {
            let biz_hash = self.hasher.hash_one(biz);
            for (code, _) in names.exact.iter() {
                let code_hash = self.hasher.hash_one(code);
                let names_match = |n: &usize| {
                    let c = &all[*n].conditions;
                    c.biz.as_ref().is_none_or(|m| m.matches(biz))
                        && c.code.as_ref().is_none_or(|m| m.matches(code))
                };
                let merged = Candidates::Merged(self.merged(biz, biz_hash, code, code_hash));
                let rules: Vec<u32> = merged
                    .map(|c| c.rule)
                    .filter(names_match)
                    .take(MAX_PAIR_CANDIDATES + 1)
                    .map(|n| n as u32)
                    .collect();
                if rules.len() <= MAX_PAIR_CANDIDATES {
                    let pair = Pair {
                        biz: biz.into(),
                        code: code.into(),
                        rules: rules.into(),
                    };
                    let hash = pair_hash(biz_hash, code_hash);
                    pairs.insert_unique(hash, pair, |p: &Pair| {
                        pair_hash(
                            self.hasher.hash_one(&*p.biz),
                            self.hasher.hash_one(&*p.code),
                        )
                    });
                }
            }
        }
        pairs
    }

    /// The rules that could decide `(biz, code)`, in first-match order.
    #[inline]
    pub(crate) fn candidates(&self, biz: &str, code: &str) -> Candidates<'_> {
        let biz_hash = self.hasher.hash_one(biz);
        let code_hash = self.hasher.hash_one(code);
        let pair = self.pairs.find(pair_hash(biz_hash, code_hash), |p| {
            *p.code == *code && *p.biz == *biz
        });
        match pair {
            Some(pair) => Candidates::Listed(pair.rules.iter()),
            None => Candidates::Merged(self.merged(biz, biz_hash, code, code_hash)),
        }
    }

    /// Collects the buckets `(biz, code)` can hit, from the names and their hashes.
    fn merged(&self, biz: &str, biz_hash: u64, code: &str, code_hash: u64) -> Lists<'_> {
        let mut lists = Lists::default();
        if let Some(names) = self.by_biz.get(biz_hash, biz) {
            names.collect(code, code_hash, &mut lists);
        }
        self.any_biz.collect(code, code_hash, &mut lists);
        lists
    }
}

/// Up to [`MAX_LISTS`] non-empty ascending lists, without allocating.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lists<'a> {
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

/// The candidates in first-match order: a pair's list merged at build time, or a merge of
/// ascending lists of rule numbers.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "it lives on the stack for one decision; boxing the merge would allocate"
)]
pub(crate) enum Candidates<'a> {
    /// An exact pair's list.
    Listed(std::slice::Iter<'a, u32>),
    /// Buckets to merge.
    Merged(Lists<'a>),
}

/// A rule that may decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Its number in first-match order.
    pub rule: usize,
    /// True when its `biz` and `code` conditions are known to hold, so that only the rest
    /// of its conditions need checking.
    pub names_hold: bool,
}

impl Iterator for Candidates<'_> {
    type Item = Candidate;

    #[inline]
    fn next(&mut self) -> Option<Candidate> {
        match self {
            Candidates::Listed(rules) => rules.next().map(|&n| Candidate {
                rule: n as usize,
                names_hold: true,
            }),
            Candidates::Merged(lists) => lists.next_merged().map(|n| Candidate {
                rule: n,
                names_hold: false,
            }),
        }
    }
}

impl Lists<'_> {
    /// The lowest head of all lists, dropped from every list that has it.
    fn next_merged(&mut self) -> Option<usize> {
        let lists = &mut self.items[..self.len];
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
