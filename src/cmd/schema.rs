//! `rebound schema`: write the JSON Schemas of rule files and test files, generated from the
//! engine's types, check that the checked-in ones are up to date, or print one for an editor.

use crate::Outcome;
use std::path::PathBuf;

/// Write schemas/rules.schema.json and schemas/rules-test.schema.json, generated from the
/// engine's types (editors use them for completion and hover docs).
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  rebound schema                 # regenerate schemas/ after changing the model\n  \
rebound schema --check         # exit 1 when schemas/ is out of date\n  \
rebound schema --out elsewhere/schemas   # for a copy of rules/ at elsewhere/rules\n  \
rebound schema --print rules > ~/.config/rebound/rules.schema.json   # for editor settings"
)]
pub struct Args {
    /// Where to write the schemas.
    #[arg(long, default_value = "schemas")]
    out: PathBuf,
    /// Write nothing; exit 1 when a file differs from what the types generate.
    #[arg(long, conflicts_with = "print")]
    check: bool,
    /// Write nothing; print one schema to stdout: `rules` (rule files) or `rules-test`
    /// (rule-test files).
    #[arg(long, value_name = "WHICH", value_parser = ["rules", "rules-test"])]
    print: Option<String>,
}

pub fn run(args: Args) -> Outcome {
    if let Some(which) = &args.print {
        let file = format!("{which}.schema.json");
        let Some((_, text)) = rebound_engine::schema::generated()
            .into_iter()
            .find(|(name, _)| *name == file)
        else {
            eprintln!("error: no schema '{which}'; expected 'rules' or 'rules-test'");
            return Outcome::Trouble;
        };
        print!("{text}");
        return Outcome::Ok;
    }
    let mut stale = 0;
    for (name, text) in rebound_engine::schema::generated() {
        let path = args.out.join(name);
        if args.check {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                eprintln!(
                    "{}: out of date; regenerate with `rebound schema --out {}`",
                    path.display(),
                    args.out.display()
                );
                stale += 1;
            }
            continue;
        }
        let written = std::fs::create_dir_all(&args.out).and_then(|()| std::fs::write(&path, text));
        if let Err(e) = written {
            eprintln!("error: cannot write {}: {e}", path.display());
            return Outcome::Trouble;
        }
        println!("wrote {}", path.display());
    }
    if stale > 0 {
        Outcome::Wrong
    } else {
        Outcome::Ok
    }
}
