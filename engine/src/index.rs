//! The decision tree's first two levels: rules indexed by exact `biz` and exact `code`.
//!
//! A rule whose `biz` (or `code`) lists only exact names is filed under each of them; a glob,
//! or no condition at all, files it under "any". A failure `(biz, code)` can then only be
//! decided by rules in four buckets: (biz, code), (biz, any), (any, code) and (any, any). Each
//! bucket keeps rule numbers in ascending order, and [`Candidates`] merges the four in that
//! order, so the first rule that matches is still the first in file order, exactly as a
//! linear scan would find it.

use crate::rule::CompiledRule;
use std::collections::HashMap;

/// Rule numbers indexed by exact biz and code.
#[derive(Debug, Default)]
pub struct RuleIndex {
    by_biz: HashMap<Box<str>, BizBucket>,
    by_code: HashMap<Box<str>, Vec<u32>>,
    any: Vec<u32>,
}

#[derive(Debug, Default)]
struct BizBucket {
    any_code: Vec<u32>,
    by_code: HashMap<Box<str>, Vec<u32>>,
}

impl RuleIndex {
    /// Files every rule under its exact names; `rules` are in first-match order.
    pub fn build(rules: &[CompiledRule]) -> RuleIndex {
        let mut index = RuleIndex::default();
        for (n, rule) in rules.iter().enumerate() {
            let n = u32::try_from(n).expect("fewer than 2^32 rules");
            let bizs = rule.conditions.biz.as_ref().and_then(|m| m.exact_names());
            let codes = rule.conditions.code.as_ref().and_then(|m| m.exact_names());
            match (bizs, codes) {
                (Some(bizs), Some(codes)) => {
                    for biz in dedup(bizs) {
                        let bucket = index.by_biz.entry(biz.into()).or_default();
                        for code in dedup(codes.clone()) {
                            bucket.by_code.entry(code.into()).or_default().push(n);
                        }
                    }
                }
                (Some(bizs), None) => {
                    for biz in dedup(bizs) {
                        index.by_biz.entry(biz.into()).or_default().any_code.push(n);
                    }
                }
                (None, Some(codes)) => {
                    for code in dedup(codes) {
                        index.by_code.entry(code.into()).or_default().push(n);
                    }
                }
                (None, None) => index.any.push(n),
            }
        }
        index
    }

    /// The rules that could decide `(biz, code)`, in first-match order.
    pub fn candidates(&self, biz: &str, code: &str) -> Candidates<'_> {
        const EMPTY: &[u32] = &[];
        let (biz_code, biz_any) = match self.by_biz.get(biz) {
            Some(bucket) => (
                bucket.by_code.get(code).map_or(EMPTY, Vec::as_slice),
                bucket.any_code.as_slice(),
            ),
            None => (EMPTY, EMPTY),
        };
        let any_code = self.by_code.get(code).map_or(EMPTY, Vec::as_slice);
        Candidates {
            lists: [biz_code, biz_any, any_code, &self.any],
        }
    }
}

fn dedup(mut names: Vec<&str>) -> Vec<&str> {
    names.sort_unstable();
    names.dedup();
    names
}

/// A merge of up to four ascending lists of rule numbers.
#[derive(Debug, Clone)]
pub struct Candidates<'a> {
    lists: [&'a [u32]; 4],
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let mut best: Option<(usize, u32)> = None;
        for (i, list) in self.lists.iter().enumerate() {
            if let Some(&head) = list.first()
                && best.is_none_or(|(_, b)| head < b)
            {
                best = Some((i, head));
            }
        }
        let (i, head) = best?;
        self.lists[i] = &self.lists[i][1..];
        Some(head as usize)
    }
}
