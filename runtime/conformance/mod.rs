//! The [`Store`] contract as a conformance suite (feature `conformance`): every case takes a
//! store as `&dyn Store` (or, if it must reopen one, the factory that opens a store in a
//! directory), so that every implementation runs the same cases, in this crate's tests
//! (SQLite) and in any other store's crate (`rebound-store-redis`). One line in a test file
//! runs them all over an implementation, as `#[test]`s in a module of that name:
//!
//! ```text
//! rebound_runtime::conformance_suite!(sqlite, open_sqlite); // open_sqlite: fn(&Path) -> Box<dyn Store>
//! ```
//!
//! The suite's files live in `runtime/conformance/`, beside the crate's source rather than in
//! it: they are a test kit, built only with the feature, not part of the framework.
//!
//! The factory is given a fresh, empty directory per case; opening it again on the same
//! directory must give back the same data (for SQLite, the file in it; for a shared store, the
//! namespace the directory names).
//!
//! What the cases pin, from the contract in `store/mod.rs`: recovery of scheduled retries with
//! their due times, the retry row living until the fate, first fate wins, acked fates pruned
//! behind their source's position (only their own source's, never dead-lettered ones) or, without
//! an offset, by time (`PruneFates`), positions
//! only moving forward, mixed ops in order in one transaction, dead-letter listing and paging,
//! a dead letter keeping its failure's attrs, replay and skip with the audit log and their
//! refusals as [`Applied`] replies, and applying the same batch twice ending in the same state.
//!
//! The cases live in `retries.rs` (recovery, the retry row, first fate wins, pruning,
//! positions, mixed ops, applying twice) and `dead_letters.rs` (listing, paging, attrs, replay,
//! skip, the audit log); `keys.rs` the ordering key kept with the message; `decisions.rs` the
//! decision log (appended in order, trimmed to `keep`, read through `since` and `limit`,
//! touching nothing else); `records.rs` builds the records and ops they write.

use std::path::Path;

use crate::store::Store;

// Each case is named for the property it checks (the store's contract, in `store/mod.rs`).
#[allow(missing_docs)]
mod dead_letters;
#[allow(missing_docs)]
mod decisions;
#[allow(missing_docs)]
mod keys;
#[allow(missing_docs)]
mod operations;
#[allow(missing_docs)]
pub mod records;
#[allow(missing_docs)]
mod retries;

/// The fresh, empty directory each case's store lives in (removed when dropped).
pub fn fresh_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory for a conformance case")
}

pub use dead_letters::*;
pub use decisions::*;
pub use keys::*;
pub use operations::*;
pub use retries::*;

/// Opens (creating if missing) a store whose data lives in the given directory.
pub type Open = fn(&Path) -> Box<dyn Store>;

/// Runs every case of the suite over the store `$open` opens (a [`Open`]), as `#[test]`s in
/// module `$name`.
#[macro_export]
macro_rules! conformance_suite {
    ($name:ident, $open:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use $crate::store::conformance::{self as suite, Open};

            const OPEN: Open = $open;

            $crate::conformance_suite!(@on_a_store
                retry_row_lives_until_the_fate_is_recorded,
                first_fate_wins_and_a_second_fate_is_reported_not_written,
                pruning_forgets_old_acks_but_keeps_dead_letter_fates,
                a_position_prunes_only_its_own_sources_acked_fates_with_offsets,
                pruning_by_time_forgets_only_old_acked_fates_without_an_offset,
                apply_runs_mixed_ops_in_order_in_one_transaction,
                positions_are_kept_per_source,
                positions_only_move_forward,
                dead_letters_filter_by_label_biz_code_and_time_newest_first,
                dead_letters_page_with_a_cursor,
                a_dead_letter_keeps_its_failures_attrs,
                replay_makes_a_fresh_delivery_keeps_history_and_is_audited,
                replayed_message_acked_afterwards_takes_the_new_fate,
                skip_marks_handled_keeps_the_fate_and_is_audited,
                replay_and_skip_refusals_come_back_as_replies_and_change_nothing,
                blank_operator_or_reason_is_refused_and_changes_nothing,
                unknown_dead_letter_is_a_clear_not_found,
                audit_log_pages_newest_first,
                applying_the_same_batch_twice_ends_in_the_same_state,
                every_failure_is_kept_in_order_with_attrs_in_a_retry_and_its_dead_letter,
                beyond_thirty_two_failures_the_first_and_last_sixteen_are_kept,
                dead_letters_filter_by_rule_message_status_text_and_overdue_and_count,
                open_letters_are_counted_by_label_with_the_overdue_and_the_oldest,
                expiry_marks_an_open_letter_expired_keeps_it_and_is_audited,
                a_redrive_counts_in_the_message_and_its_next_letter,
                scheduled_retries_are_listed_soonest_first_filtered_and_paged,
                retry_now_moves_a_scheduled_retry_keeps_its_attempt_and_is_audited,
                a_kill_is_a_dead_letter_and_an_audit_line_in_one_batch,
                the_audit_log_filters_by_operator_action_and_time,
                the_ordering_key_is_kept_in_a_retry_a_dead_letter_and_their_replay,
                the_decision_log_keeps_the_newest_entries_oldest_first_and_writes_nothing_else,
                the_decision_log_is_written_in_order_with_the_other_ops_of_its_batch,
                the_decision_log_applied_twice_logs_again_and_keep_zero_empties_it,
            );
            $crate::conformance_suite!(@reopening
                recovery_restores_every_retry_with_its_original_due_time_and_overdue_ones_fire_at_once,
                recovered_overdue_retry_is_returned_by_pop_due_without_waiting,
            );
        }
    };
    (@on_a_store $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let dir = suite::fresh_dir();
                let store = OPEN(dir.path());
                suite::$case(&*store);
            }
        )*
    };
    (@reopening $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let dir = suite::fresh_dir();
                suite::$case(OPEN, dir.path());
            }
        )*
    };
}
