//! The product's modules are layered (`docs/design.md`, "Where things live"): each imports
//! only the ones below it, so there is no import loop and nothing runs back up. This test reads
//! the sources and names every line that breaks the order. Test code is left out (a test may
//! build what it checks from anywhere).

use std::path::Path;

/// Top to bottom. Modules on one line are one layer and do not import each other.
const LAYERS: &[&[&str]] = &[
    &["app"],
    &["pipeline", "relay"],
    &["console"],
    &["admin"],
    &["metrics"],
    &["release"],
    &["alerts"],
    &["config"],
    &["json", "falls_under", "outbound"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The product's code lines of `file`: up to its first `#[cfg(test)]` item, comments left out.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !l.starts_with("#[cfg(test)]"))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(n, l)| (n + 1, l))
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path
                .file_stem()
                .is_some_and(|s| s.to_string_lossy().ends_with("tests"))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_module_of_the_product_imports_one_above_it_or_beside_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src/");
        let module = rel
            .components()
            .next()
            .expect("a first component")
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        let Some(own) = layer_of(&module) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        for (n, line) in code_lines(&text) {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name == module {
                    continue;
                }
                if let Some(other) = layer_of(&name)
                    && other <= own
                {
                    wrong.push(format!(
                        "src/{}:{n}: {module} imports {name}",
                        rel.display()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}
