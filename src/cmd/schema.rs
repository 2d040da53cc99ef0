//! `rebound schema`: write the JSON Schemas of rule files and test files, generated from the
//! engine's types, or check that the checked-in ones are up to date.

use crate::Outcome;
use std::path::PathBuf;

/// Write schemas/rules.schema.json and schemas/rules-test.schema.json, generated from the
/// engine's types (editors use them for completion and hover docs).
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  rebound schema                 # regenerate schemas/ after changing the model\n  \
rebound schema --check         # exit 1 when schemas/ is out of date"
)]
pub struct Args {
    /// Where to write the schemas.
    #[arg(long, default_value = "schemas")]
    out: PathBuf,
    /// Write nothing; exit 1 when a file differs from what the types generate.
    #[arg(long)]
    check: bool,
}

pub fn run(args: Args) -> Outcome {
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
