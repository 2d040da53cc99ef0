//! The `labels:` sections of a set → its [`Labels`]: each label's name and values checked
//! where they are written, a label defined twice named at both places, and, once the set
//! defines labels, every `dead_letter` an author wrote checked against them (a warning).

use super::{Compiler, FileCx};
use crate::diag::{Diagnostic, Pos, did_you_mean};
use crate::labels::{LabelPolicy, Labels, Redrive};
use crate::model::LabelSpec;
use crate::types::Label;
use std::collections::HashMap;
use std::sync::Arc;

/// A `dead_letter` as its author wrote it (not the built-in `default`), kept to be checked
/// against the labels once every file is read.
pub(super) struct WrittenLabel {
    pub file: Arc<str>,
    pub pos: Option<Pos>,
    pub label: Label,
}

impl Compiler<'_> {
    /// Every label of every file, in file order.
    pub(super) fn labels(&mut self, files: &[FileCx]) -> Labels {
        let mut seen: HashMap<&str, (Arc<str>, Pos)> = HashMap::new();
        let mut out = Vec::new();
        for f in files {
            let Some(spec) = &f.model.labels else {
                continue;
            };
            // A name written twice in one mapping: its nth entry is its nth key.
            let mut nth: HashMap<&str, usize> = HashMap::new();
            for (name, label) in &spec.0 {
                let path = format!("labels.{name}");
                let n = nth.entry(name.as_str()).or_default();
                let pos = f
                    .positions
                    .key_occurrences(&path)
                    .get(*n)
                    .copied()
                    .or_else(|| f.positions.entry("labels"))
                    .unwrap_or(Pos::new(1, 1));
                *n += 1;
                if let Some(problem) = name_problem(name) {
                    self.error(f, Some(pos), problem);
                    continue;
                }
                if let Some((file, first)) = seen.get(name.as_str()) {
                    let msg = format!("duplicate label '{name}': first defined at {file}:{first}");
                    self.error(f, Some(pos), msg);
                    continue;
                }
                seen.insert(name, (f.file.clone(), pos));
                out.push(self.label_policy(f, &path, name, pos, label));
            }
        }
        Labels::new(out)
    }

    fn label_policy(
        &mut self,
        f: &FileCx,
        path: &str,
        name: &str,
        pos: Pos,
        spec: &LabelSpec,
    ) -> LabelPolicy {
        let redrive = spec.redrive.as_ref().map(|r| {
            let max_path = format!("{path}.redrive.max");
            if r.max == 0 {
                let at = f.positions.value(&max_path);
                self.error(f, at, format!(
                    "bad redrive max 0 for label '{name}': a label that redrives replays its letters at least once (max >= 1); remove 'redrive' to never replay them"
                ));
            }
            Redrive {
                after: self.duration(f, &format!("{path}.redrive.after"), &r.after),
                max: r.max,
            }
        });
        let alert_path = format!("{path}.alert");
        if spec.alert.as_ref().is_some_and(|a| a.trim().is_empty()) {
            let at = f.positions.value(&alert_path);
            self.error(f, at, format!(
                "the alert of label '{name}' is empty; name a receiver of the runtime configuration, such as 'oncall'"
            ));
        }
        LabelPolicy {
            label: Label::from(name),
            description: spec.description.clone(),
            redrive,
            alert: spec.alert.clone(),
            sla: spec
                .sla
                .as_ref()
                .map(|v| self.duration(f, &format!("{path}.sla"), v)),
            expire: spec
                .expire
                .as_ref()
                .map(|v| self.duration(f, &format!("{path}.expire"), v)),
            file: f.file.to_string(),
            pos,
            alert_pos: spec
                .alert
                .as_ref()
                .and_then(|_| f.positions.value(&alert_path)),
        }
    }

    /// When the set defines labels, a warning for each written `dead_letter` that names none
    /// of them, with the nearest defined label.
    pub(super) fn check_dead_letters(&mut self, labels: &Labels) {
        let written = std::mem::take(&mut self.written);
        if labels.is_empty() {
            return;
        }
        let names = labels.names();
        for w in written {
            let label = w.label.as_str();
            if labels.get(label).is_some() {
                continue;
            }
            let mut d = Diagnostic::warning(
                &*w.file,
                w.pos,
                format!(
                    "dead_letter '{label}' names no label of the set (it defines {})",
                    list(&names)
                ),
            );
            if let Some(best) = did_you_mean(label, &names) {
                d = d.with_help(format!("did you mean '{best}'?"));
            }
            self.diags.push(d);
        }
    }
}

/// `'L1', 'L2' and 2 more`: the defined labels, shortly.
fn list(names: &[&str]) -> String {
    const SHOWN: usize = 5;
    let quoted: Vec<String> = names.iter().take(SHOWN).map(|n| format!("'{n}'")).collect();
    let mut s = quoted.join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}

/// What is wrong with a label name, if anything. Names follow the rule-id syntax, with
/// capitals allowed as well (`L1`, `payment-dlq`): letters, digits, `.`, `_` and `-`,
/// starting with a letter or digit.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the label name is empty; labels look like 'L1' or 'payment-dlq'".into());
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    (!(first_ok && rest_ok)).then(|| format!(
        "bad label name '{name}': labels are letters, digits, '.', '_' and '-', starting with a letter or digit"
    ))
}

#[cfg(test)]
mod tests {
    use crate::{Diagnostic, Rejected, SourceFile, compile};
    use std::path::Path;
    use std::time::Duration;

    fn fixture() -> crate::CompiledSet {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/labels");
        crate::load_dir(&dir).unwrap().unwrap()
    }

    fn rejected(files: &[(&str, &str)]) -> Vec<Diagnostic> {
        let files = files
            .iter()
            .map(|(name, yaml)| SourceFile::new(*name, format!("rules/{name}"), *yaml))
            .collect();
        let Err(Rejected(diags)) = compile(files) else {
            panic!("the set loaded");
        };
        diags
    }

    fn warnings(yaml: &str) -> Vec<Diagnostic> {
        compile(vec![SourceFile::new("a.yaml", "rules/a.yaml", yaml)])
            .unwrap()
            .warnings()
            .to_vec()
    }

    #[test]
    fn every_key_of_the_spec_example_is_read() {
        let set = fixture();
        assert_eq!(set.warnings(), &[] as &[Diagnostic]);
        let labels = set.labels();
        let names: Vec<&str> = labels.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "L3", "L4"]);
        let l1 = labels.get("L1").unwrap();
        assert_eq!(
            l1.description.as_deref(),
            Some("transient trouble that outlived its retries")
        );
        let redrive = l1.redrive.unwrap();
        assert_eq!((redrive.after, redrive.max), (Duration::from_secs(600), 3));
        assert_eq!(l1.sla, Some(Duration::from_secs(3600)));
        assert_eq!((l1.alert.as_deref(), l1.expire), (None, None));
        assert!(
            l1.at()
                .ends_with("tests/fixtures/labels/20-labels.yaml:4:3"),
            "{}",
            l1.at()
        );
        let l2 = labels.get("L2").unwrap();
        assert_eq!(l2.alert.as_deref(), Some("oncall"));
        assert!(l2.alert_at().unwrap().ends_with("20-labels.yaml:9:12"));
        assert_eq!(l2.sla, Some(Duration::from_secs(15 * 60)));
        assert_eq!(
            labels.get("L3").unwrap().sla,
            Some(Duration::from_secs(7200))
        );
        let l4 = labels.get("L4").unwrap();
        assert_eq!(l4.expire, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!((l4.redrive, l4.sla, l4.alert_pos), (None, None, None));
    }

    #[test]
    fn an_unknown_key_of_a_label_is_located_with_a_suggestion() {
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nlabels:\n  L1:\n    sla: 1h\n    redrive: { after: 10m, max: 3 }\n    expires: 30d\n",
        )]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].to_string().starts_with(
                "rules/a.yaml:6:5: error: unknown field 'expires', expected one of 'description'"
            ),
            "{}",
            d[0]
        );
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'expire'?"));
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nlabels:\n  L1:\n    redrive:\n      afterr: 10m\n      max: 3\n",
        )]);
        assert!(
            d[0].to_string()
                .starts_with("rules/a.yaml:5:7: error: unknown field 'afterr'"),
            "{}",
            d[0]
        );
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'after'?"));
    }

    #[test]
    fn an_unknown_top_level_key_is_still_an_error() {
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nlabel:\n  L1: {}\nlimits:\n  - id: b\n",
        )]);
        assert!(
            d[0].to_string()
                .starts_with("rules/a.yaml:2:1: error: unknown field 'label'"),
            "{}",
            d[0]
        );
        assert_eq!(d[0].help.as_deref(), Some("did you mean 'labels'?"));
        assert!(
            d[1].to_string()
                .starts_with("rules/a.yaml:4:1: error: unknown field 'limits'"),
            "{}",
            d[1]
        );
    }

    #[test]
    fn bad_values_are_located() {
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nlabels:\n  L1:\n    redrive: { after: 10m, max: 0 }\n  L2:\n    sla: soon\n  L3:\n    alert: ''\n  L4:\n    redrive: { after: 1x, max: -1 }\n  bad label:\n    sla: 1h\n",
        )]);
        let shown: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 1, "{shown:#?}");
        // serde stops at the negative max; the rest is the compiler's.
        assert!(
            shown[0]
                .starts_with("rules/a.yaml:10:32: error: invalid type: integer '-1', expected u32"),
            "{shown:#?}"
        );
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nlabels:\n  L1:\n    redrive: { after: 10m, max: 0 }\n  L2:\n    sla: soon\n  L3:\n    alert: ''\n  L4:\n    redrive: { after: 1x, max: 1 }\n  bad label:\n    sla: 1h\n",
        )]);
        let shown: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 5, "{shown:#?}");
        assert!(
            shown[0].starts_with("rules/a.yaml:4:33: error: bad redrive max 0 for label 'L1'"),
            "{shown:#?}"
        );
        assert!(
            shown[1].starts_with("rules/a.yaml:6:10: error: bad duration 'soon'"),
            "{shown:#?}"
        );
        assert!(
            shown[2].starts_with("rules/a.yaml:8:12: error: the alert of label 'L3' is empty"),
            "{shown:#?}"
        );
        assert!(
            shown[3].starts_with("rules/a.yaml:10:23: error: bad duration '1x'"),
            "{shown:#?}"
        );
        assert!(
            shown[4].starts_with("rules/a.yaml:11:3: error: bad label name 'bad label'"),
            "{shown:#?}"
        );
    }

    #[test]
    fn a_label_defined_twice_names_both_places() {
        let d = rejected(&[
            ("10-a.yaml", "version: 1\nlabels:\n  L1:\n    sla: 1h\n"),
            (
                "20-b.yaml",
                "version: 1\nrules: []\nlabels:\n  L2: {}\n  L1:\n    sla: 2h\n",
            ),
        ]);
        assert_eq!(
            d.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "rules/20-b.yaml:5:3: error: duplicate label 'L1': first defined at rules/10-a.yaml:3:3"
            ]
        );
        // Twice in one file, which a YAML map alone would take silently (the last wins).
        let d = rejected(&[(
            "a.yaml",
            "version: 1\nlabels:\n  L1:\n    sla: 1h\n  L2: {}\n  L1:\n    sla: 2h\n",
        )]);
        assert_eq!(
            d.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["rules/a.yaml:6:3: error: duplicate label 'L1': first defined at rules/a.yaml:3:3"]
        );
    }

    #[test]
    fn an_undefined_dead_letter_label_warns_with_the_nearest_one() {
        let w = warnings(
            "version: 1\ndefaults:\n  dead_letter: L9\nrules:\n  - id: a\n    match: { code: X }\n    give_up: true\n    dead_letter: L11\n  - id: b\n    give_up: true\n    dead_letter: L2\nlabels:\n  L1: {}\n  L2:\n",
        );
        let shown: Vec<String> = w.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "rules/a.yaml:3:16: warning: dead_letter 'L9' names no label of the set (it defines 'L1', 'L2')",
                "rules/a.yaml:8:18: warning: dead_letter 'L11' names no label of the set (it defines 'L1', 'L2')",
            ]
        );
        assert_eq!(w[1].help.as_deref(), Some("did you mean 'L1'?"));
    }

    #[test]
    fn no_label_warning_without_labels_or_for_the_implicit_default() {
        // No labels: any dead_letter goes.
        assert_eq!(
            warnings("version: 1\nrules:\n  - id: a\n    give_up: true\n    dead_letter: L9\n"),
            []
        );
        // Labels, and rules that take the built-in `default` without writing it.
        assert_eq!(
            warnings("version: 1\nrules:\n  - id: a\n    give_up: true\nlabels:\n  L1: {}\n"),
            []
        );
    }
}
