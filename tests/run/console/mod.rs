//! The web console (`docs/spec/console.md`), part of the `run` test binary, in a real headless Chromium (Debian's `chromium`
//! through its `chromedriver`), clicked through as an operator would, against a real
//! `rebound run --admin` with dead letters:
//!
//! - `pages`: every page loads with no console error and no request outside the admin
//!   address, with `Content-Security-Policy: default-src 'self'`; a screenshot of each at
//!   1280×800 under `target/console-screenshots/`; the dead letters fit a phone's width;
//! - `dead_letters`: filtered by label, two selected and replayed with operator and reason;
//! - `rules`: an invalid edit's errors with file:line:col and the line they point at, a valid
//!   push, and a stale push's 409;
//! - `rules_push`: Validate's warnings, a push its rule tests refuse (and pushed anyway), a
//!   rollback that names its version and waits for a confirmation;
//! - `history`: the diff between two accepted versions;
//! - `canary`: a running canary's two arms side by side, aborted from the page;
//! - `whatif`: **What would change?** shows `POST /v1/rules/whatif`'s table for the edited
//!   files;
//! - `escaping`: a failure message holding `<script>` shows as text and opens no dialog;
//! - `paths`: one chart per rule, each loaded;
//! - `message`: a redriven message's payload and its failures of every cycle;
//! - `layout`: the overview's rates labelled as window means, the dead-letter rows at 1280 px
//!   and on a phone;
//! - `accessibility`: axe-core (vendored in `axe/`) on every page, no serious or critical
//!   violation.
//!
//! `webdriver` is the small WebDriver client they share, `server` the run, `check` what every
//! page must satisfy.

mod check;
mod server;
mod webdriver;

mod accessibility;
mod canary;
mod dead_letters;
mod escaping;
mod history;
mod layout;
mod message;
mod pages;
mod paths;
mod rules;
mod rules_push;
mod whatif;
