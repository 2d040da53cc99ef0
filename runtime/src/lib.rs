//! rebound-runtime: the Storm-style stream runtime (topology, acker, scheduler, store, admin API).
#![forbid(unsafe_code)]
