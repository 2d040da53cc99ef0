//! The `budgets:` and `breakers:` sections of a set → [`BudgetPolicy`]s and
//! [`BreakerPolicy`]s: ids in the rule-id syntax, each defined once in the set (a second
//! definition names the first's place), percentages as `20%` or a number from 0 to 1,
//! durations and counts checked where they are written.

use super::ids::Seen;
use super::{Compiler, FileCx};
use crate::adaptive::{BreakerPolicy, BudgetPolicy, Exhausted, PerKey, Scope};
use crate::model::{Scalar, ScopeSpec};
use crate::rule::Conditions;
use std::time::Duration;

impl Compiler<'_> {
    /// Every budget of every file, in file order.
    pub(super) fn budgets(&mut self, files: &[FileCx]) -> Vec<BudgetPolicy> {
        let mut seen = Seen::new();
        let mut out = Vec::new();
        for f in files {
            for (i, spec) in f.model.budgets.iter().flatten().enumerate() {
                let path = format!("budgets.{i}");
                let pos = f.positions.value(&format!("{path}.id"));
                if !self.new_id(f, pos, "budget", &spec.id, &mut seen) {
                    continue;
                }
                let exhausted = match spec.exhausted.as_deref() {
                    None | Some("hold") => Exhausted::Hold,
                    Some("dead_letter") => Exhausted::DeadLetter,
                    Some(other) => {
                        let at = f.positions.value(&format!("{path}.exhausted"));
                        self.error(f, at, format!(
                            "bad exhausted '{other}' for budget '{}': write hold (fire once there is room again) or dead_letter (reason budget)",
                            spec.id
                        ));
                        Exhausted::Hold
                    }
                };
                out.push(BudgetPolicy {
                    id: spec.id.clone(),
                    scope: self.scope(f, &path, spec.scope.as_ref()),
                    ratio: self.share(f, &format!("{path}.ratio"), "ratio", &spec.ratio),
                    min_per_s: spec
                        .min_per_s
                        .as_ref()
                        .map_or(1.0, |v| self.per_second(f, &format!("{path}.min_per_s"), v)),
                    window: self.positive(f, &format!("{path}.window"), spec.window.as_ref(), 10),
                    exhausted,
                    file: f.file.to_string(),
                    pos,
                });
            }
        }
        out
    }

    /// Every breaker of every file, in file order.
    pub(super) fn breakers(&mut self, files: &[FileCx]) -> Vec<BreakerPolicy> {
        let mut seen = Seen::new();
        let mut out = Vec::new();
        for f in files {
            for (i, spec) in f.model.breakers.iter().flatten().enumerate() {
                let path = format!("breakers.{i}");
                let pos = f.positions.value(&format!("{path}.id"));
                if !self.new_id(f, pos, "breaker", &spec.id, &mut seen) {
                    continue;
                }
                let per = spec.per.as_deref().and_then(|p| {
                    let parsed = match p {
                        "biz" => Some(PerKey::Biz),
                        "code" => Some(PerKey::Code),
                        _ => p
                            .strip_prefix("attrs.")
                            .filter(|n| !n.is_empty())
                            .map(|n| PerKey::Attr(n.to_owned())),
                    };
                    if parsed.is_none() {
                        let at = f.positions.value(&format!("{path}.per"));
                        self.error(f, at, format!(
                            "bad per '{p}' for breaker '{}': write biz, code or attrs.NAME (one breaker per value of it)",
                            spec.id
                        ));
                    }
                    parsed
                });
                let min_samples = spec.min_samples.unwrap_or(20);
                if min_samples == 0 {
                    let at = f.positions.value(&format!("{path}.min_samples"));
                    self.error(f, at, format!(
                        "bad min_samples 0 for breaker '{}': a breaker needs at least one finished tree to judge (default 20)",
                        spec.id
                    ));
                }
                if spec.open_at.is_none() && spec.open_on_heat.is_none() {
                    self.error(f, pos, format!(
                        "breaker '{}' never opens: give open_at (a failed share), open_on_heat (a heat), or both",
                        spec.id
                    ));
                }
                let open_on_heat = spec.open_on_heat.filter(|h| {
                    let fine = h.is_finite() && *h > 0.0;
                    if !fine {
                        let at = f.positions.value(&format!("{path}.open_on_heat"));
                        self.error(f, at, format!(
                            "bad open_on_heat '{h}' for breaker '{}': a heat above 0 (each failure adds its code's weight, 1 unless heat.weights says)",
                            spec.id
                        ));
                    }
                    fine
                });
                let cool_down = self.duration(f, &format!("{path}.cool_down"), &spec.cool_down);
                out.push(BreakerPolicy {
                    id: spec.id.clone(),
                    scope: self.scope(f, &path, spec.scope.as_ref()),
                    per,
                    open_at: spec
                        .open_at
                        .as_ref()
                        .map(|v| self.share(f, &format!("{path}.open_at"), "open_at", v)),
                    open_on_heat,
                    min_samples,
                    window: self.positive(f, &format!("{path}.window"), spec.window.as_ref(), 10),
                    cool_down,
                    ramp: self.positive(f, &format!("{path}.ramp"), spec.ramp.as_ref(), 60),
                    file: f.file.to_string(),
                    pos,
                });
            }
        }
        out
    }

    fn scope(&mut self, f: &FileCx, path: &str, spec: Option<&ScopeSpec>) -> Scope {
        let Some(m) = spec else {
            return Scope::default();
        };
        let mp = format!("{path}.match");
        Scope(Conditions {
            biz: self.optional_names(f, &format!("{mp}.biz"), m.biz.as_ref()),
            code: self.optional_names(f, &format!("{mp}.code"), m.code.as_ref()),
            attrs: self.keyed_names(f, &format!("{mp}.attrs"), m.attrs.as_ref()),
            ..Conditions::default()
        })
    }

    /// A share written `20%` or as a number from 0 to 1.
    fn share(&mut self, f: &FileCx, path: &str, what: &str, v: &Scalar) -> f64 {
        let parsed = match v {
            Scalar::Str(s) => s
                .trim()
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<f64>().ok())
                .filter(|p| (0.0..=100.0).contains(p))
                .map(|p| p / 100.0),
            Scalar::Int(n) => Some(*n as f64).filter(|x| (0.0..=1.0).contains(x)),
            Scalar::Float(x) => Some(*x).filter(|x| (0.0..=1.0).contains(x)),
        };
        parsed.unwrap_or_else(|| {
            let at = f.positions.value(path);
            self.error(f, at, format!(
                "bad {what} '{v}': write a percentage from 0% to 100% (e.g. 20%) or a number from 0 to 1"
            ));
            0.0
        })
    }

    fn per_second(&mut self, f: &FileCx, path: &str, v: &Scalar) -> f64 {
        let parsed = match v {
            Scalar::Int(n) => Some(*n as f64),
            Scalar::Float(x) => Some(*x),
            Scalar::Str(s) => s.trim().parse().ok(),
        }
        .filter(|x: &f64| x.is_finite() && *x >= 0.0);
        parsed.unwrap_or_else(|| {
            let at = f.positions.value(path);
            self.error(f, at, format!(
                "bad min_per_s '{v}': write how many retries per second are always allowed, a number >= 0 (default 1)"
            ));
            1.0
        })
    }

    /// A duration that must be more than zero, `default_s` seconds when absent.
    fn positive(&mut self, f: &FileCx, path: &str, v: Option<&Scalar>, default_s: u64) -> Duration {
        let Some(v) = v else {
            return Duration::from_secs(default_s);
        };
        let d = self.duration(f, path, v);
        if d.is_zero() {
            let at = f.positions.value(path);
            self.error(
                f,
                at,
                format!(
                    "bad {}: it must be longer than 0",
                    path.rsplit('.').next().unwrap_or(path)
                ),
            );
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use crate::adaptive::{Exhausted, PerKey};
    use crate::context::FailureContext;
    use crate::{Diagnostic, Rejected, SourceFile, compile};
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// The spec's `budgets:` and `breakers:` example.
    const EXAMPLE: &str = "version: 1
budgets:
  - id: payment-retries
    match: { biz: PAYMENT }           # biz, code, attrs as in a rule's match; omitted: all
    ratio: 20%                        # retries at most 20% of first deliveries in the window
    min_per_s: 5                      # default 1
    window: 10s                       # default 10s
    exhausted: hold                   # hold (default) or dead_letter (reason `budget`)
breakers:
  - id: payment-gateway
    match: { biz: PAYMENT, code: [NET_TIMEOUT, PAY_PROCESSING] }
    per: attrs.downstream             # optional: biz, code or attrs.NAME; one breaker per value
    open_at: 50%
    min_samples: 20                   # default 20
    window: 10s                       # default 10s
    cool_down: 30s
    ramp: 1m                          # default 1m
";

    fn set(files: &[(&str, &str)]) -> crate::CompiledSet {
        compile(
            files
                .iter()
                .map(|(n, y)| SourceFile::new(*n, format!("rules/{n}"), *y))
                .collect(),
        )
        .unwrap()
    }

    fn rejected(files: &[(&str, &str)]) -> Vec<String> {
        diagnostics(files)
            .iter()
            .map(Diagnostic::to_string)
            .collect()
    }

    fn diagnostics(files: &[(&str, &str)]) -> Vec<Diagnostic> {
        let files = files
            .iter()
            .map(|(n, y)| SourceFile::new(*n, format!("rules/{n}"), *y))
            .collect();
        let Err(Rejected(diags)) = compile(files) else {
            panic!("the set loaded");
        };
        diags
    }

    fn ctx<'a>(
        biz: &'a str,
        code: &'a str,
        attrs: &'a BTreeMap<String, String>,
    ) -> FailureContext<'a> {
        let mut ctx = FailureContext::new(biz, code, 1);
        ctx.attrs = attrs;
        ctx
    }

    #[test]
    fn every_key_of_the_spec_example_is_read() {
        let s = set(&[("a.yaml", EXAMPLE)]);
        let b = &s.budgets()[0];
        assert_eq!(b.id, "payment-retries");
        assert_eq!((b.ratio, b.min_per_s), (0.2, 5.0));
        assert_eq!(
            (b.window, b.exhausted),
            (Duration::from_secs(10), Exhausted::Hold)
        );
        assert_eq!(b.pos.map(|p| (p.line, p.column)), Some((3, 9)));
        let k = &s.breakers()[0];
        assert_eq!(k.id, "payment-gateway");
        assert_eq!(k.per, Some(PerKey::Attr("downstream".into())));
        assert_eq!((k.open_at, k.min_samples), (Some(0.5), 20));
        assert_eq!(k.window, Duration::from_secs(10));
        assert_eq!(
            (k.cool_down, k.ramp),
            (Duration::from_secs(30), Duration::from_secs(60))
        );
    }

    #[test]
    fn defaults_apply_and_shares_may_be_numbers() {
        let s = set(&[(
            "a.yaml",
            "version: 1\nbudgets:\n  - { id: all, ratio: 0.1 }\nbreakers:\n  - { id: everything, open_at: 1, cool_down: 5s }\n",
        )]);
        let b = &s.budgets()[0];
        assert_eq!(
            (b.ratio, b.min_per_s, b.window),
            (0.1, 1.0, Duration::from_secs(10))
        );
        assert_eq!(b.exhausted, Exhausted::Hold);
        let k = &s.breakers()[0];
        assert_eq!(
            (k.open_at, k.min_samples, k.per.clone()),
            (Some(1.0), 20, None)
        );
        assert_eq!(k.ramp, Duration::from_secs(60));
    }

    #[test]
    fn a_failure_falls_under_the_first_matching_budget_and_every_matching_breaker() {
        let s = set(&[(
            "a.yaml",
            "version: 1
budgets:
  - { id: pay, match: { biz: PAYMENT }, ratio: 20% }
  - { id: rest, ratio: 10% }
breakers:
  - { id: gateway, match: { code: NET_* }, per: attrs.downstream, open_at: 50%, cool_down: 30s }
  - { id: all, open_at: 90%, cool_down: 1m }
",
        )]);
        let attrs: BTreeMap<String, String> = [("downstream".to_owned(), "pg-1".to_owned())].into();
        let pay = ctx("PAYMENT", "NET_TIMEOUT", &attrs);
        assert_eq!(s.budget_for(&pay).map(|b| b.id.as_str()), Some("pay"));
        let ids: Vec<&str> = s.breakers_for(&pay).map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["gateway", "all"]);
        assert_eq!(
            s.breakers()[0].per.as_ref().unwrap().value(&pay),
            Some("pg-1")
        );
        let none = BTreeMap::new();
        let order = ctx("ORDER", "BAD_JSON", &none);
        assert_eq!(s.budget_for(&order).map(|b| b.id.as_str()), Some("rest"));
        let ids: Vec<&str> = s.breakers_for(&order).map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["all"]);
    }

    #[test]
    fn an_id_defined_twice_names_both_places_even_across_files() {
        let errors = rejected(&[
            (
                "a.yaml",
                "version: 1\nbudgets:\n  - { id: pay, ratio: 20% }\n",
            ),
            (
                "b.yaml",
                "version: 1\nbudgets:\n  - { id: pay, ratio: 10% }\nbreakers:\n  - { id: gw, open_at: 50%, cool_down: 1s }\n  - { id: gw, open_at: 60%, cool_down: 1s }\n",
            ),
        ]);
        assert!(
            errors.iter().any(|e| e.starts_with("rules/b.yaml:3:11: error: duplicate budget id 'pay': first defined at rules/a.yaml:3:11")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("rules/b.yaml:6:11: error: duplicate breaker id 'gw': first defined at rules/b.yaml:5:11")),
            "{errors:?}"
        );
    }

    #[test]
    fn bad_values_are_located() {
        let errors = rejected(&[(
            "a.yaml",
            "version: 1
budgets:
  - id: Pay
    ratio: 20%
  - id: pay
    ratio: 120%
    min_per_s: -1
    window: 0s
    exhausted: drop
breakers:
  - id: gw
    per: downstream
    open_at: 1.5
    min_samples: 0
    cool_down: soon
",
        )]);
        for want in [
            "rules/a.yaml:3:9: error: bad budget id 'Pay'",
            "rules/a.yaml:6:12: error: bad ratio '120%'",
            "rules/a.yaml:7:16: error: bad min_per_s '-1'",
            "rules/a.yaml:8:13: error: bad window",
            "rules/a.yaml:9:16: error: bad exhausted 'drop' for budget 'pay'",
            "rules/a.yaml:12:10: error: bad per 'downstream' for breaker 'gw'",
            "rules/a.yaml:13:14: error: bad open_at '1.5'",
            "rules/a.yaml:14:18: error: bad min_samples 0",
            "rules/a.yaml:15:16: error:",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(want)),
                "{want} not in {errors:#?}"
            );
        }
    }

    #[test]
    fn a_breaker_opens_on_a_share_on_heat_or_on_both_and_on_one_at_least() {
        let set = set(&[(
            "a.yaml",
            "version: 1\nbreakers:\n  - { id: hot, open_on_heat: 5, cool_down: 30s }\n  - { id: both, open_at: 50%, open_on_heat: 2.5, cool_down: 30s }\n",
        )]);
        let b = set.breakers();
        assert_eq!((b[0].open_at, b[0].open_on_heat), (None, Some(5.0)));
        assert_eq!((b[1].open_at, b[1].open_on_heat), (Some(0.5), Some(2.5)));
        let errors = rejected(&[(
            "a.yaml",
            "version: 1\nbreakers:\n  - { id: never, cool_down: 30s }\n  - { id: cold, open_on_heat: 0, cool_down: 30s }\n",
        )]);
        for want in [
            "rules/a.yaml:3:11: error: breaker 'never' never opens: give open_at (a failed share), open_on_heat (a heat), or both",
            "rules/a.yaml:4:31: error: bad open_on_heat '0' for breaker 'cold'",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(want)),
                "{want} not in {errors:#?}"
            );
        }
    }

    #[test]
    fn a_misspelt_key_gets_did_you_mean() {
        let d = diagnostics(&[(
            "a.yaml",
            "version: 1\nbreakers:\n  - { id: gw, open_at: 50%, cool_dwn: 1s }\n",
        )]);
        assert!(d[0].message.contains("unknown field 'cool_dwn'"), "{d:?}");
        assert_eq!(
            d[0].help.as_deref(),
            Some("did you mean 'cool_down'?"),
            "{d:?}"
        );
    }
}
