//! `rebound run` and the bundled pipeline behind it, one module per former test file: its life
//! cycle (`run_lifecycle`), a data directory that holds another run and `--fresh`
//! (`run_data_dir`), the README's `run` and `serve` commands in order (`readme_commands`),
//! `kill -9` and restart (`run_kill9`), a rule edited mid-run
//! (`run_hot_reload`), the configuration file's keys and flags over them (`run_config`),
//! labels that redrive (`run_labels`), ordered keys (`run_ordered`), the pipeline through its library API
//! (`durable_pipeline`), its metrics (`run_metrics`) and logs (`run_logs`), and the alerting
//! rules and dashboard that ship in `deploy/` (`deploy`), the web console in a real
//! headless Chromium (`console`), and what-if over a finished run's decision log
//! (`run_whatif`). `support` starts the binary and reads a run's state from outside.

mod support;

mod console;
mod deploy;
mod durable_pipeline;
mod readme_commands;
mod run_config;
mod run_data_dir;
mod run_hot_reload;
mod run_kill9;
mod run_labels;
mod run_lifecycle;
mod run_logs;
mod run_metrics;
mod run_ordered;
mod run_outage;
mod run_rules_fire;
mod run_whatif;

#[path = "../cli/whatif_log.rs"]
mod whatif_log;
