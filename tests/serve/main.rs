//! `rebound serve`, end to end over loopback, one module per former test file: the start-up
//! line and `--json` (`cli_serve`), the admin API (`serve_api`), the dead-letter desk
//! (`serve_dead_letters`), the operator's routes (`serve_operator`), alerts to a webhook (`serve_alerts`, with a
//! `receiver` of the test's own) and to a real Alertmanager (`serve_alertmanager`), labels that redrive
//! (`serve_redrive`), the config-center puller (`serve_pull`), the rules watcher
//! (`serve_watch`) and what-if over the running process's decision log (`serve_whatif`).
//! `support` starts the binary and speaks HTTP to it.

mod receiver;
mod support;

mod cli_serve;
mod embedded;
mod embedded_stream;
mod serve_alertmanager;
mod serve_alerts;
mod serve_api;
mod serve_dead_letters;
mod serve_fleet;
mod serve_fleet_canary;
mod serve_fleet_letters;
mod serve_fleet_pace;
mod serve_operator;
mod serve_pull;
mod serve_ready;
mod serve_redrive;
mod serve_release;
mod serve_watch;
mod serve_whatif;

#[path = "../cli/whatif_log.rs"]
mod whatif_log;

mod relay;
