//! The durable layer over SQLite (over a shared Redis: `store-redis/tests/fleet/shared_store.rs`): the seams on their own and in a live topology
//! (`durable_seams`), the journal as a writer (`journal_writes`) and giving up on a store that
//! refuses every commit (`journal_gives_up`), a durable source's position (`durable_source`), the rule engine deciding through the durable seams
//! (`durable_policy`), overdue retries spread after a restart (`restart_spread`), ordered keys
//! across a restart and an operator's skip (`durable_ordered`), and a real
//! SIGKILL in the middle of writing (`crash_recovery`).

mod crash_recovery;
mod custody;
mod decision_log;
mod durable_ordered;
mod durable_policy;
mod durable_seams;
mod durable_source;
mod failure_history;
mod journal_gives_up;
mod journal_writes;
mod labels;
mod restart_spread;
