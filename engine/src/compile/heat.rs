//! The `heat:` section of a set → its [`HeatPolicy`]: at most one file has it (a second is
//! named with the first), its half-life is a duration, each weight's code a name or glob and
//! its weight a finite number of at least 0.

use super::{Compiler, FileCx};
use crate::diag::Pos;
use crate::heat::{HeatPolicy, HeatWeight};
use crate::model::{HeatSpec, Scalar};
use crate::pattern::NamePattern;

impl Compiler<'_> {
    /// The set's heat policy: the defaults when no file has `heat:`.
    pub(super) fn heat(&mut self, files: &[FileCx]) -> HeatPolicy {
        let mut found: Option<(&FileCx, Pos, &HeatSpec)> = None;
        for f in files {
            let Some(spec) = &f.model.heat else {
                continue;
            };
            let here = f.positions.entry("heat").unwrap_or(Pos::new(1, 1));
            if let Some((first, at, _)) = found {
                let msg = format!(
                    "heat is declared twice: here and at {}:{at}; only one file of a set may have it",
                    first.file
                );
                self.error(f, Some(here), msg);
                continue;
            }
            found = Some((f, here, spec));
        }
        let Some((f, pos, spec)) = found else {
            return HeatPolicy::default();
        };
        let half_life = match &spec.half_life {
            Some(v) => {
                let errors_before = self.error_count();
                let d = self.duration(f, "heat.half_life", v);
                if d.is_zero() && self.error_count() == errors_before {
                    let at = f.positions.value("heat.half_life");
                    self.error(
                        f,
                        at,
                        "a half_life of 0 forgets every failure at once; give a positive duration such as 30s",
                    );
                }
                d
            }
            None => HeatPolicy::DEFAULT_HALF_LIFE,
        };
        let mut weights = Vec::new();
        for (i, w) in spec.weights.iter().flatten().enumerate() {
            let path = format!("heat.weights.{i}");
            let code = self.code_pattern(f, &format!("{path}.code"), &w.code);
            let weight = self.weight(f, &format!("{path}.weight"), &w.weight);
            if let (Some(code), Some(weight)) = (code, weight) {
                weights.push(HeatWeight::new(code, weight));
            }
        }
        HeatPolicy::new(half_life, weights, Some((f.file.to_string(), pos)))
    }

    /// A weight: a finite number of at least 0, or `None` after reporting why not.
    fn weight(&mut self, f: &FileCx, path: &str, value: &Scalar) -> Option<f64> {
        let weight = match value {
            Scalar::Int(n) => Some(*n as f64),
            Scalar::Float(x) => Some(*x),
            Scalar::Str(_) => None,
        };
        match weight {
            Some(w) if w.is_finite() && w >= 0.0 => Some(w),
            _ => {
                let at = f.positions.value(path);
                let shown = match value {
                    Scalar::Str(s) => format!("'{s}'"),
                    other => other.to_string(),
                };
                self.error(
                    f,
                    at,
                    format!(
                        "bad heat weight {shown}: a weight is a number of at least 0, e.g. 3 or 0.5"
                    ),
                );
                None
            }
        }
    }

    /// One error-code pattern (`NET_TIMEOUT`, `NET_*`), or `None` after reporting why not.
    fn code_pattern(&mut self, f: &FileCx, path: &str, value: &Scalar) -> Option<NamePattern> {
        let text = match value {
            Scalar::Str(s) => s.clone(),
            Scalar::Int(n) => n.to_string(),
            Scalar::Float(x) => {
                let at = f.positions.value(path);
                self.error(
                    f,
                    at,
                    format!("expected a code or a glob, found the number {x}"),
                );
                return None;
            }
        };
        match NamePattern::parse(&text) {
            Ok(p) => Some(p),
            Err(e) => {
                let at = f.positions.value(path);
                self.error(f, at, e);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::diag::Diagnostic;
    use crate::heat::HeatPolicy;
    use crate::{SourceFile, compile};
    use std::time::Duration;

    fn files(list: &[(&str, &str)]) -> Vec<SourceFile> {
        list.iter()
            .map(|(name, text)| SourceFile::new(*name, format!("rules/{name}"), *text))
            .collect()
    }

    fn heat(yaml: &str) -> HeatPolicy {
        compile(files(&[("a.yaml", yaml)]))
            .unwrap_or_else(|e| panic!("{e}"))
            .heat()
            .clone()
    }

    fn rejected(list: &[(&str, &str)]) -> Vec<Diagnostic> {
        match compile(files(list)) {
            Ok(_) => panic!("the set must be rejected"),
            Err(e) => e.0,
        }
    }

    fn shown(d: &[Diagnostic]) -> Vec<String> {
        d.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_key_of_the_spec_example_parses() {
        let h = heat(
            "version: 1\nheat:\n  half_life: 30s                      # default 30s\n  weights:                            # first matching code pattern wins; unmatched codes weigh 1\n    - { code: \"NET_*\", weight: 3 }\n    - { code: \"DB_*\", weight: 2 }\n",
        );
        assert_eq!(h.half_life(), Duration::from_secs(30));
        let written: Vec<(String, f64)> =
            h.weights().iter().map(|w| (w.code(), w.weight())).collect();
        assert_eq!(
            written,
            [("NET_*".to_string(), 3.0), ("DB_*".to_string(), 2.0)]
        );
        assert_eq!(h.weight("NET_TIMEOUT"), 3.0);
        assert_eq!(h.weight("DB_LOCK_WAIT"), 2.0);
        assert_eq!(h.weight("BAD_JSON"), 1.0);
        assert_eq!(h.at().as_deref(), Some("rules/a.yaml:2:1"));
    }

    #[test]
    fn the_first_matching_pattern_wins_and_unmatched_codes_weigh_one() {
        let h = heat(
            "version: 1\nheat:\n  weights:\n    - { code: NET_DNS, weight: 0 }\n    - { code: \"NET_*\", weight: 2.5 }\n    - { code: \"*\", weight: 7 }\n",
        );
        assert_eq!(h.half_life(), HeatPolicy::DEFAULT_HALF_LIFE);
        assert_eq!(h.weight("NET_DNS"), 0.0);
        assert_eq!(h.weight("NET_TIMEOUT"), 2.5);
        assert_eq!(h.weight("ANYTHING"), 7.0);
        let h = heat("version: 1\nheat:\n  weights:\n    - { code: \"*_TIMEOUT\", weight: 4 }\n");
        assert_eq!(h.weight("DB_TIMEOUT"), 4.0);
        assert_eq!(h.weight("TIMEOUT"), 1.0);
        assert_eq!(h.weight(""), 1.0);
        // An empty section is the defaults too, but written somewhere.
        let h = heat("version: 1\nheat: {}\n");
        assert_eq!(
            (h.half_life(), h.weight("X")),
            (Duration::from_secs(30), 1.0)
        );
        assert!(h.at().is_some());
    }

    #[test]
    fn a_set_without_heat_has_the_defaults() {
        let h = heat("version: 1\nrules: []\n");
        assert_eq!(h, HeatPolicy::default());
        assert_eq!(h.half_life(), Duration::from_secs(30));
        assert_eq!((h.weight("NET_TIMEOUT"), h.weight("")), (1.0, 1.0));
        assert!(h.weights().is_empty() && h.at().is_none());
    }

    #[test]
    fn heat_in_two_files_names_both_places() {
        let d = rejected(&[
            ("10-a.yaml", "version: 1\nheat:\n  half_life: 10s\n"),
            (
                "20-b.yaml",
                "version: 1\nrules: []\nheat:\n  half_life: 20s\n",
            ),
        ]);
        assert_eq!(
            shown(&d),
            [
                "rules/20-b.yaml:3:1: error: heat is declared twice: here and at rules/10-a.yaml:2:1; only one file of a set may have it"
            ]
        );
    }

    #[test]
    fn an_unknown_key_gets_a_suggestion_at_its_place() {
        let d = rejected(&[("a.yaml", "version: 1\nheat:\n  half_lif: 10s\n")]);
        assert!(
            d[0].to_string()
                .starts_with("rules/a.yaml:3:3: error: unknown field 'half_lif', expected 'half_life' or 'weights'"),
            "{}",
            d[0]
        );
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'half_life'?"));
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nheat:\n  weights:\n    - { code: \"NET_*\", wieght: 3 }\n",
        )]);
        assert!(
            d[0].to_string().starts_with(
                "rules/a.yaml:4:24: error: unknown field 'wieght', expected 'code' or 'weight'"
            ),
            "{}",
            d[0]
        );
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'weight'?"));
        let d = rejected(&[("a.yaml", "version: 1\nhaet:\n  half_life: 10s\n")]);
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'heat'?"));
    }

    #[test]
    fn bad_values_are_located() {
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nheat:\n  half_life: soon\n  weights:\n    - { code: \"NET_?\", weight: 3 }\n    - { code: DB, weight: -1 }\n    - { code: X, weight: .nan }\n",
        )]);
        assert_eq!(
            shown(&d),
            [
                "rules/a.yaml:3:14: error: bad duration 'soon': expected a number; expected e.g. '250ms', '1.5s', '2m', '1h30m' or a bare number of milliseconds",
                "rules/a.yaml:5:15: error: bad glob 'NET_?': '?' is not supported; only '*' (any run of characters) is",
                "rules/a.yaml:6:27: error: bad heat weight -1: a weight is a number of at least 0, e.g. 3 or 0.5",
                "rules/a.yaml:7:26: error: bad heat weight NaN: a weight is a number of at least 0, e.g. 3 or 0.5",
            ]
        );
        let d = rejected(&[("a.yaml", "version: 1\nheat:\n  half_life: 0s\n")]);
        assert!(
            d[0].to_string()
                .starts_with("rules/a.yaml:3:14: error: a half_life of 0 forgets every failure"),
            "{}",
            d[0]
        );
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nheat:\n  weights:\n    - { code: X, weight: heavy }\n",
        )]);
        assert_eq!(
            shown(&d),
            [
                "rules/a.yaml:4:26: error: bad heat weight 'heavy': a weight is a number of at least 0, e.g. 3 or 0.5"
            ]
        );
    }

    #[test]
    fn a_misspelt_section_is_an_unknown_top_level_key_with_a_suggestion() {
        for (key, near) in [
            ("heats", "heat"),
            ("budget", "budgets"),
            ("breaker", "breakers"),
        ] {
            let d = rejected(&[("a.yaml", &format!("version: 1\n{key}: []\n"))]);
            assert!(
                d[0].to_string()
                    .starts_with(&format!("rules/a.yaml:2:1: error: unknown field '{key}'")),
                "{}",
                d[0]
            );
            assert_eq!(
                d[0].help.as_deref(),
                Some(format!("did you mean '{near}'?").as_str())
            );
        }
    }
}
