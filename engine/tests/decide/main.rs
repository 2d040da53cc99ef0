//! The decision through the public API: property tests against a naive scan and the spec's
//! ranges, rhai bounds at decision time, and what a decision allocates.

mod allocations;
mod counting;
mod decide_props;
mod guards;
mod redrives;
