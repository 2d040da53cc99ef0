//! The ids of rules, budgets and breakers: one syntax (`db-lock`, `[a-z0-9][a-z0-9._-]*`)
//! and, within each kind, one definition in the set (a second names the first's place).

use super::{Compiler, FileCx};
use crate::diag::Pos;
use std::collections::HashMap;
use std::sync::Arc;

/// Where each id of one kind was first defined.
pub(super) type Seen = HashMap<String, (Arc<str>, Option<Pos>)>;

impl Compiler<'_> {
    /// Checks a rule's id: not empty, not the reserved `defaults`, then as [`Self::new_id`].
    pub(super) fn check_id(&mut self, f: &FileCx, pos: Option<Pos>, id: &str, seen: &mut Seen) {
        if id.is_empty() {
            return self.error(
                f,
                pos,
                "the rule id is empty; ids look like 'db-lock' ([a-z0-9][a-z0-9._-]*)",
            );
        }
        if id == "defaults" {
            return self.error(f, pos, "'defaults' is reserved (it names the set's defaults in decisions); pick another id");
        }
        self.new_id(f, pos, "rule", id, seen);
    }

    /// Checks the id of a `kind` (rule, budget, breaker) at `pos`: the rule-id syntax, and
    /// not defined before in `seen`, where it is then recorded. False (with an error) when
    /// it fails either.
    pub(super) fn new_id(
        &mut self,
        f: &FileCx,
        pos: Option<Pos>,
        kind: &str,
        id: &str,
        seen: &mut Seen,
    ) -> bool {
        let mut chars = id.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let rest_ok =
            chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if !(first_ok && rest_ok) {
            self.error(f, pos, format!(
                "bad {kind} id '{id}': ids are lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
            ));
            return false;
        }
        if let Some((file, first)) = seen.get(id) {
            let at = first.map_or(file.to_string(), |p| format!("{file}:{p}"));
            self.error(
                f,
                pos,
                format!("duplicate {kind} id '{id}': first defined at {at}"),
            );
            return false;
        }
        seen.insert(id.to_owned(), (f.file.clone(), pos));
        true
    }
}
