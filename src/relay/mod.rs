//! `rebound relay`'s parts (`sources.md`): the source it reads ([`source`]), the handler it
//! calls for each delivery ([`handler`]) from its bolt ([`bolt`]), and the report it prints
//! after its stop ([`report`]). The job that puts them together is `app::relay`.

pub mod bolt;
pub mod handler;
pub mod report;
pub mod source;
