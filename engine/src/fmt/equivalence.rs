//! The set-level check behind `rebound fmt`: two compiled sets decide alike on a grid of
//! failures drawn from the names their rules mention, each decided with the same seed.

use crate::context::{Attrs, FailureContext};
use crate::set::CompiledSet;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_yaml::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// `Ok` when `a` and `b` decide alike on a grid of failures built from the names their
/// files' `match:` sections mention (and names they do not), every attempt up to two past
/// the largest `max_retries`, a few elapsed times and a `retry_after`; each failure is decided
/// with the same fixed seed in both. `Err` describes the first failure they disagree on.
/// Versions are not compared: formatting changes them by design.
pub fn same_decisions(a: &CompiledSet, b: &CompiledSet) -> Result<(), Disagreement> {
    first_difference(a, b).map_err(Disagreement)
}

/// The first failure two sets decide differently (or the first label or heat setting they
/// differ in), described for the person who ran `rebound fmt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Disagreement(pub String);

fn first_difference(a: &CompiledSet, b: &CompiledSet) -> Result<(), String> {
    same_labels(a, b)?;
    same_heat(a, b)?;
    let mut names = Names::default();
    for file in a.files.iter().chain(&b.files) {
        if let Some(v) = file
            .text()
            .and_then(|t| serde_yaml::from_str::<Value>(t).ok())
        {
            names.collect(&v, None);
        }
    }
    let top = a
        .rules
        .iter()
        .chain(&b.rules)
        .filter_map(|r| r.policy())
        .chain([a.defaults.policy.as_ref(), b.defaults.policy.as_ref()])
        .map(|p| p.max_retries)
        .max()
        .unwrap_or(3)
        .saturating_add(2)
        .min(64);
    let (attr_sets, header_sets) = (one_each(&names.attrs), one_each(&names.headers));
    let elapsed = [0, 1_500, 90_000, 1_800_000].map(Duration::from_millis);
    let mut n: u64 = 0;
    for biz in &names.biz {
        for code in &names.code {
            for attempt in 1..=top {
                for e in elapsed {
                    n += 1;
                    let attrs = &attr_sets[n as usize % attr_sets.len()];
                    // A stride prime to the attrs' keeps every pairing of the two in the grid.
                    let headers = &header_sets[(n / 7) as usize % header_sets.len()];
                    let ctx = FailureContext {
                        elapsed: e,
                        retry_after: n.is_multiple_of(3).then(|| Duration::from_secs(2)),
                        last_delay: Duration::from_millis(n % 5 * 700),
                        attrs,
                        headers,
                        ..FailureContext::new(biz, code, attempt)
                    };
                    let da = a.decide(&ctx, &mut StdRng::seed_from_u64(n)).decision;
                    let db = b.decide(&ctx, &mut StdRng::seed_from_u64(n)).decision;
                    if da != db {
                        return Err(format!(
                            "biz {biz:?}, code {code:?}, attempt {attempt}, elapsed {e:?}, attrs {attrs:?}, headers {headers:?}: {da:?} before, {db:?} after"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The empty map, and one map per name and value of `names`.
fn one_each(names: &BTreeMap<String, BTreeSet<String>>) -> Vec<Attrs> {
    let mut out = vec![Attrs::new()];
    for (name, values) in names {
        for v in values {
            out.push(Attrs::from([(name.clone(), v.clone())]));
        }
    }
    out
}

/// `Ok` when both sets weigh failures alike: the same half-life and weights, in order.
fn same_heat(a: &CompiledSet, b: &CompiledSet) -> Result<(), String> {
    let heat = |s: &CompiledSet| {
        let h = s.heat();
        let weights: Vec<(String, f64)> =
            h.weights().iter().map(|w| (w.code(), w.weight())).collect();
        (h.half_life(), weights)
    };
    let (before, after) = (heat(a), heat(b));
    if before == after {
        return Ok(());
    }
    Err(format!("heat {before:?} before, {after:?} after"))
}

/// `Ok` when both sets define the same labels with the same policies, in any place.
fn same_labels(a: &CompiledSet, b: &CompiledSet) -> Result<(), String> {
    let policies = |s: &CompiledSet| {
        let mut all: Vec<_> = s
            .labels()
            .iter()
            .map(|p| {
                let redrive = p.redrive.map(|r| (r.after, r.max));
                let what = (&p.description, redrive, &p.alert, p.sla, p.expire);
                (p.label.as_str(), format!("{what:?}"))
            })
            .collect();
        all.sort();
        all
    };
    let (before, after) = (policies(a), policies(b));
    if before == after {
        return Ok(());
    }
    Err(format!("labels {before:?} before, {after:?} after"))
}

/// The names the `match:` sections mention: each as written, and for a glob its shortest
/// match and a longer one; plus the empty name and one no rule mentions.
struct Names {
    biz: BTreeSet<String>,
    code: BTreeSet<String>,
    attrs: BTreeMap<String, BTreeSet<String>>,
    headers: BTreeMap<String, BTreeSet<String>>,
}

impl Default for Names {
    fn default() -> Self {
        let base: BTreeSet<String> = [String::new(), "UNKNOWN_NAME".to_string()].into();
        Names {
            biz: base.clone(),
            code: base,
            attrs: BTreeMap::new(),
            headers: BTreeMap::new(),
        }
    }
}

impl Names {
    /// Walks `v`; `under` is the key of the mapping `v` is the value of.
    fn collect(&mut self, v: &Value, under: Option<&str>) {
        match v {
            Value::Mapping(m) => {
                for (k, v) in m {
                    let key = k.as_str();
                    match (under, key) {
                        (Some("match"), Some("biz")) => strings(v, &mut self.biz),
                        (Some("match"), Some("code")) => strings(v, &mut self.code),
                        (Some("match"), Some(which @ ("attrs" | "headers"))) => {
                            let into = match which {
                                "attrs" => &mut self.attrs,
                                _ => &mut self.headers,
                            };
                            if let Value::Mapping(named) = v {
                                for (name, values) in named {
                                    if let Some(name) = name.as_str() {
                                        strings(values, into.entry(name.to_string()).or_default());
                                    }
                                }
                            }
                        }
                        _ => self.collect(v, key),
                    }
                }
            }
            Value::Sequence(s) => s.iter().for_each(|v| self.collect(v, under)),
            _ => {}
        }
    }
}

fn strings(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            out.insert(s.replace('*', ""));
            out.insert(s.replace('*', "_X"));
        }
        Value::Sequence(s) => s.iter().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SourceFile, compile};

    fn set(yaml: &str) -> CompiledSet {
        compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap()
    }

    #[test]
    fn same_decisions_sees_a_changed_delay_label_or_order_but_not_key_order() {
        let a = set(
            "version: 1\nrules:\n  - id: a\n    match: { code: \"DB_*\" }\n    retry: { backoff: { fixed: 1s } }\n  - id: b\n    match: { attrs: { tier: gold } }\n    give_up: true\n",
        );
        let same = set(
            "version: 1\nrules:\n  - match: { code: \"DB_*\" }\n    retry: { backoff: { fixed: 1s } }\n    id: a\n  - give_up: true\n    id: b\n    match: { attrs: { tier: gold } }\n",
        );
        assert_eq!(same_decisions(&a, &same), Ok(()));
        for other in [
            "version: 1\nrules:\n  - id: a\n    match: { code: \"DB_*\" }\n    retry: { backoff: { fixed: 2s } }\n  - id: b\n    match: { attrs: { tier: gold } }\n    give_up: true\n",
            "version: 1\nrules:\n  - id: a\n    match: { code: \"DB_*\" }\n    retry: { backoff: { fixed: 1s } }\n  - id: b\n    match: { attrs: { tier: gold } }\n    give_up: true\n    dead_letter: L9\n",
            "version: 1\nrules:\n  - id: b\n    match: { attrs: { tier: gold } }\n    give_up: true\n  - id: a\n    match: { code: \"DB_*\" }\n    retry: { backoff: { fixed: 1s } }\n",
        ] {
            assert!(same_decisions(&a, &set(other)).is_err(), "{other}");
        }
    }

    #[test]
    fn same_decisions_sees_a_changed_label_policy_but_not_its_place() {
        let a = set("version: 1
labels:
  L1:
    sla: 1h
    redrive: { after: 10m, max: 3 }
");
        let moved = set("version: 1

labels:
  L1:
    redrive: { max: 3, after: 10m }
    sla: 1h
");
        assert_eq!(same_decisions(&a, &moved), Ok(()));
        let other = set("version: 1
labels:
  L1:
    sla: 1h
    redrive: { after: 10m, max: 2 }
");
        assert!(same_decisions(&a, &other).is_err());
    }
}
