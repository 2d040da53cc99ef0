//! The command line on rule sets, one module per former test file: `check`, `decide`,
//! `explain` and `--json` (`cli_rules`), `--header` and `--now` (`headers_now`), `labels:`
//! sections (`labels`), `heat:` sections (`heat`), the configuration file
//! of `run` and `serve` (`config_file`), what a broken rule file reports (`load_errors`),
//! `paths` (`paths_lints`, `paths_shipped`, `paths_svg`: the charts), `test` (`ruletest_cli`, `ruletest_seed_search`),
//! the JSON schemas (`schema_drift`, `schema_validate`) and properties of the shipped rules
//! (`shipped_rules_props`), what-if over a known decision log (`whatif`), and the README's
//! examples run as written (`readme_examples`).
//! Fixtures are in `tests/fixtures/`.

mod budgets_breakers;
mod cli_rules;
mod config_file;
mod fmt;
mod headers_now;
mod heat;
mod labels;
mod load_errors;
mod paths_lints;
mod paths_shipped;
mod paths_svg;
mod readme_examples;
mod redrives;
mod ruletest_cli;
mod ruletest_seed_search;
mod schema_drift;
mod schema_validate;
mod shipped_rules_props;
mod whatif;
mod whatif_log;
