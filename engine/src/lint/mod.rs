//! Static checks over a compiled set: problems that do not make it wrong, but that a rule
//! author wants to hear about. One file per lint, each a [`LintRule`].

mod impossible_retry;
mod long_delay;
mod long_path;
mod shadowed;
mod unused_schedule;

use crate::diag::Diagnostic;
use crate::index::RuleIndex;
use crate::rule::CompiledRule;
use crate::script::ScriptEngine;
use crate::set::Defaults;

/// What a lint looks at.
pub(crate) struct LintCx<'a> {
    pub rules: &'a [CompiledRule],
    /// The set's decision index, built once and shared with the lints that need it.
    pub index: &'a RuleIndex,
    pub defaults: &'a Defaults,
    pub scripts: &'a ScriptEngine,
}

/// One static check.
pub(crate) trait LintRule {
    fn check(&self, cx: &LintCx<'_>, out: &mut Vec<Diagnostic>);
}

/// Runs every lint and returns its warnings.
pub(crate) fn run(
    rules: &[CompiledRule],
    index: &RuleIndex,
    defaults: &Defaults,
    scripts: &ScriptEngine,
) -> Vec<Diagnostic> {
    let cx = LintCx {
        rules,
        index,
        defaults,
        scripts,
    };
    let lints: [&dyn LintRule; 5] = [
        &shadowed::Shadowed,
        &impossible_retry::ImpossibleRetry,
        &long_delay::LongDelay,
        &long_path::LongPath,
        &unused_schedule::UnusedSchedule,
    ];
    let mut out = Vec::new();
    for lint in lints {
        lint.check(&cx, &mut out);
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use crate::{SourceFile, compile};

    /// The warnings of a one-file set, as `check` prints them.
    pub(crate) fn warnings(yaml: &str) -> Vec<String> {
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
        set.warnings().iter().map(ToString::to_string).collect()
    }
}
