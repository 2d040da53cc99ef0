//! The durable layer over SQLite: the seams on their own and in a live topology
//! (`durable_seams`), the journal giving up on a store that refuses every commit
//! (`journal_gives_up`), the rule engine deciding through the durable seams
//! (`durable_policy`), and a real SIGKILL in the middle of writing (`crash_recovery`).

mod crash_recovery;
mod durable_policy;
mod durable_seams;
mod journal_gives_up;
