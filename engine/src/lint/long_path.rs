//! A retry path whose worst-case total delay exceeds one day: a message could sit in the
//! retry queue for more than a day before anyone hears of it.

use super::{LintCx, LintRule};
use crate::backoff::ONE_DAY;
use crate::diag::{Diagnostic, Pos};
use crate::duration::DurationDisplay;
use crate::paths::policy_path;
use crate::rule::Outcome;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct LongPath;

impl LintRule for LongPath {
    fn check(&self, cx: &LintCx<'_>, out: &mut Vec<Diagnostic>) {
        let defaults = &cx.defaults.policy;
        for rule in cx.rules {
            // A rule without `retry:` shares the defaults' policy: reported once, there.
            let Outcome::Retry(policy) = &rule.outcome else {
                continue;
            };
            if Arc::ptr_eq(policy, defaults) {
                continue;
            }
            let path = policy_path(rule.id.as_str(), None, policy, "", cx.scripts, &[]);
            if let Some(msg) = too_long(&path) {
                let text = format!("rule '{}': {msg}", rule.id);
                out.push(Diagnostic::warning(&*rule.file, rule.pos, text));
            }
        }
        let d = cx.defaults;
        let path = policy_path("defaults", None, &d.policy, "", cx.scripts, &[]);
        if let Some(msg) = too_long(&path) {
            let file = d.file.as_deref().unwrap_or("(built-in defaults)");
            out.push(Diagnostic::warning(
                file,
                d.pos.or(Some(Pos::new(1, 1))),
                format!("defaults: {msg}"),
            ));
        }
    }
}

/// Why the path is too long, if it is.
fn too_long(path: &crate::paths::RetryPath) -> Option<String> {
    let last = path.retries.last()?;
    let worst = Duration::from_millis(last.total_worst_ms);
    (worst > ONE_DAY).then(|| {
        format!(
            "its retry path can wait {} in total in the worst case ({} retries), more than one day; lower max_retries, cap the backoff with 'max', or set max_elapsed",
            DurationDisplay(worst),
            last.retry
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::warnings;

    #[test]
    fn a_path_over_one_day_is_reported_at_its_rule() {
        let w = warnings(
            "version: 1\nrules:\n  - id: slow\n    retry: { max_retries: 30, backoff: { fixed: 1h } }\n",
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "a.yaml:3:5: warning: rule 'slow': its retry path can wait 1d6h in total"
            ),
            "{w:?}"
        );
    }

    #[test]
    fn max_elapsed_or_few_retries_keep_it_quiet() {
        assert!(warnings("version: 1\nrules:\n  - id: ok\n    retry: { max_retries: 30, max_elapsed: 12h, backoff: { fixed: 1h } }\n").is_empty());
        assert!(warnings("version: 1\nrules:\n  - id: ok\n    retry: { max_retries: 24, backoff: { fixed: 1h } }\n").is_empty());
    }

    #[test]
    fn defaults_are_reported_once() {
        let w = warnings(
            "version: 1\ndefaults:\n  retry: { max_retries: 48, backoff: { fixed: 1h } }\nrules:\n  - id: a\n    match: { code: A }\n",
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("defaults: its retry path can wait 2d"),
            "{w:?}"
        );
    }
}
