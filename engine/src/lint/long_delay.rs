//! A script or jitter whose delay can exceed one hour while the backoff has no `max`.

use super::{LintCx, LintRule};
use crate::backoff::{BackoffKind, Jitter, RetryPolicy};
use crate::context::FailureContext;
use crate::diag::{Diagnostic, Pos};
use crate::duration::DurationDisplay;
use crate::script::ScriptEngine;
use std::time::Duration;

pub(crate) struct LongDelay;

const ONE_HOUR_MS: u64 = 3_600_000;
/// Retries looked at; beyond this a delay has long saturated.
const HORIZON: u32 = 1_000;

impl LintRule for LongDelay {
    fn check(&self, cx: &LintCx<'_>, out: &mut Vec<Diagnostic>) {
        for rule in cx.rules {
            if let Some(policy) = rule.policy()
                && let Some(msg) = too_long(policy, cx.scripts)
            {
                let text = format!("rule '{}': {msg}", rule.id);
                out.push(Diagnostic::warning(&*rule.file, rule.pos, text));
            }
        }
        let d = cx.defaults;
        if let Some(msg) = too_long(&d.policy, cx.scripts) {
            let file = d.file.as_deref().unwrap_or("(built-in defaults)");
            out.push(Diagnostic::warning(
                file,
                d.pos.or(Some(Pos::new(1, 1))),
                format!("defaults: {msg}"),
            ));
        }
    }
}

/// Why `policy` can wait over an hour without a cap, if it can.
fn too_long(policy: &RetryPolicy, scripts: &ScriptEngine) -> Option<String> {
    let backoff = &policy.backoff;
    let is_script = matches!(backoff.kind, BackoffKind::Script(_));
    if backoff.kind.max().is_some() || (!is_script && backoff.jitter == Jitter::None) {
        return None;
    }
    let mut last = Duration::ZERO;
    for r in 1..=policy.max_retries.min(HORIZON) {
        let ctx = FailureContext {
            last_delay: last,
            ..FailureContext::new("SAMPLE", "SAMPLE", r)
        };
        let d = backoff.kind.base_delay_ms(r, &ctx, scripts).ok()?;
        let (_, hi) = backoff.jitter_range_ms(d, last);
        if hi > ONE_HOUR_MS {
            let what = if is_script {
                "its backoff script"
            } else {
                "its jitter"
            };
            return Some(format!(
                "{what} can make retry {r} wait up to {} and the backoff has no 'max'; add a 'max' to cap it",
                DurationDisplay(Duration::from_millis(hi))
            ));
        }
        last = Duration::from_millis(hi);
    }
    None
}
