//! The decision log as the store keeps it: each [`LoggedDecision`] as one JSON text (the
//! engine's serde form, the same in every store), appended in order by
//! [`WriteOp::LogDecisions`](super::WriteOp::LogDecisions) and trimmed to the newest `keep`
//! entries in the same transaction; read back through a [`DecisionFilter`], oldest first.
//!
//! The entries travel as a [`DecisionPage`]: their texts already written, one line each, in
//! one buffer. The runtime writes an entry's text when it logs the decision (on the deciding
//! task, beside the decision), so the journal, the one writer of the store, hands the store
//! a few buffers a batch instead of encoding thousands of entries itself; SQLite keeps a page
//! as one row.
//!
//! It is a sample for analysis (what-if decides every logged context again), not a record:
//! a batch applied twice may log its entries twice, and trimming forgets the oldest. An entry
//! that no longer parses (written by a build whose engine shaped it otherwise) is skipped on
//! read with a warning; the rest of the log is still read.

use rebound_engine::release::LoggedDecision;

use super::Result;
use super::values::corrupt;
use crate::time::Timestamp;

/// Which logged decisions [`Store::decisions`](super::Store::decisions) returns: those whose
/// context's `now_ms` is at or after `since`, the newest `limit` of them (all when `None`),
/// oldest first. "Newest" is the log's order (the order the entries were appended), which on
/// a fleet need not be the order of their `now_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecisionFilter {
    /// Only decisions made at or after this (on the context's `now_ms`).
    pub since: Option<Timestamp>,
    /// At most this many, the newest (all when `None`).
    pub limit: Option<usize>,
}

impl DecisionFilter {
    /// True if a decision made at `now_ms` passes `since` (the limit aside).
    pub fn admits(&self, now_ms: u64) -> bool {
        self.since.is_none_or(|since| now_ms >= since.as_millis())
    }

    /// True if `d` passes `since` (the limit aside).
    pub fn matches(&self, d: &LoggedDecision) -> bool {
        self.admits(d.context.now_ms)
    }
}

/// Logged decisions on their way to the store, oldest first: each entry's stored text (its
/// JSON, [`decision_to_json`]'s) on a line of its own, with the decision's `now_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionPage {
    /// The entries' texts, each ended by a newline (compact JSON has none inside it).
    text: String,
    /// Each entry's `now_ms` and the end of its line in `text` (past the newline).
    entries: Vec<(u64, usize)>,
}

impl DecisionPage {
    /// An empty page.
    pub fn new() -> DecisionPage {
        DecisionPage::default()
    }

    /// An empty page with room for `bytes` of text without growing.
    pub fn with_capacity(bytes: usize) -> DecisionPage {
        DecisionPage {
            text: String::with_capacity(bytes),
            entries: Vec::new(),
        }
    }

    /// The bytes of text it holds.
    pub fn bytes(&self) -> usize {
        self.text.len()
    }

    /// A page of `decisions`, in their order.
    pub fn of(decisions: &[LoggedDecision]) -> Result<DecisionPage> {
        let mut page = DecisionPage::new();
        for d in decisions {
            page.push(d)?;
        }
        Ok(page)
    }

    /// Appends `d`'s text.
    pub fn push(&mut self, d: &LoggedDecision) -> Result<()> {
        self.push_text(d.context.now_ms, &decision_to_json(d)?);
        Ok(())
    }

    /// Appends an entry's stored text ([`decision_to_json`]'s: compact JSON, which escapes
    /// every newline it holds).
    pub(crate) fn push_text(&mut self, now_ms: u64, text: &str) {
        self.text.push_str(text);
        self.text.push('\n');
        self.entries.push((now_ms, self.text.len()));
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each entry's `now_ms` and stored text (without its newline), oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        let starts = std::iter::once(0).chain(self.entries.iter().map(|&(_, end)| end));
        starts
            .zip(&self.entries)
            .map(|(start, &(at, end))| (at, &self.text[start..end - 1]))
    }

    /// The texts, a line each (as SQLite keeps a page).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The earliest and latest `now_ms` of its entries (`None` when empty).
    pub fn span(&self) -> Option<(u64, u64)> {
        let ats = self.entries.iter().map(|&(at, _)| at);
        Some((ats.clone().min()?, ats.max()?))
    }

    /// Its entries in pages of at most `n` (at least 1), in order.
    pub fn chunks(&self, n: usize) -> Vec<DecisionPage> {
        let n = n.max(1);
        let mut pages = Vec::new();
        let mut page = DecisionPage::new();
        for (at, text) in self.iter() {
            if page.len() == n {
                pages.push(std::mem::take(&mut page));
            }
            page.push_text(at, text);
        }
        if !page.is_empty() {
            pages.push(page);
        }
        pages
    }

    /// Its entries read back (one that does not parse is skipped with a warning, as a read of
    /// the store skips it).
    pub fn decisions(&self) -> Vec<LoggedDecision> {
        self.iter()
            .enumerate()
            .filter_map(|(i, (_, text))| decision_from_json("a decision page", i, text.as_bytes()))
            .collect()
    }
}

/// `decision_pages.packing` of a page whose entries are LZ4-compressed ([`pack`]).
pub(super) const PACKED: i64 = 1;

/// `decision_pages.packing` of a page whose entries are the lines as they are (a page of a
/// version-6 store's log).
const PLAIN: i64 = 0;

/// A page's entries as SQLite keeps them: its lines, LZ4-compressed (size first). Logged
/// decisions repeat themselves (the same codes, rules, versions and signal names): a page
/// shrinks about tenfold, and its bytes are most of what writing it costs.
pub(super) fn pack(page: &DecisionPage) -> Vec<u8> {
    lz4_flex::compress_prepend_size(page.text().as_bytes())
}

/// A stored page's lines from its `entries` as `packing` says they are held.
pub(super) fn unpack(packing: i64, entries: Vec<u8>) -> Result<String> {
    let bytes = match packing {
        PLAIN => entries,
        PACKED => lz4_flex::decompress_size_prepended(&entries)
            .map_err(|e| corrupt("decision_pages", "entries", e))?,
        other => return Err(corrupt("decision_pages", "packing", other)),
    };
    String::from_utf8(bytes).map_err(|e| corrupt("decision_pages", "entries", e))
}

/// The stored text of `d`: its JSON.
pub fn decision_to_json(d: &LoggedDecision) -> Result<String> {
    serde_json::to_string(d).map_err(|e| corrupt("decisions", "entry", e))
}

/// The entry stored as `text` in `location` (numbered `at` there, for the warning), or `None`
/// with a warning if it does not parse: one bad entry never fails a read of the log.
pub fn decision_from_json(
    location: &str,
    at: impl std::fmt::Display,
    text: &[u8],
) -> Option<LoggedDecision> {
    match serde_json::from_slice(text) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(store = location, entry = %at, error = %e,
                "skipping a decision log entry that does not parse");
            None
        }
    }
}
