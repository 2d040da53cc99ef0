//! Writing a whole rule set into its directory so that it survives a restart.
//!
//! Each file goes to a hidden temporary file first (the loader never reads hidden files),
//! is flushed to disk, and is then renamed over its final name; rule files that the new set
//! does not have are removed; finally the directory itself is flushed so the renames are
//! durable. Files whose bytes are already right are left alone, so writing the set that is
//! already there touches nothing and wakes no watcher.

use crate::load::{SourceFile, is_rule_file_name};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why a pushed file name is refused: names must be plain `*.yaml`/`*.yml` file names.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.contains("..") {
        return Err(format!(
            "'{name}' is not a plain file name: it must not contain '..'"
        ));
    }
    if name.contains('/') || name.contains('\\') {
        return Err(format!(
            "'{name}' is not a plain file name: it must not contain '/' or '\\'"
        ));
    }
    if name.contains('\0') || name.chars().any(char::is_control) {
        return Err(format!("'{name}' contains a control character"));
    }
    if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
        return Err(format!("'{name}' must end in .yaml or .yml"));
    }
    if !is_rule_file_name(name) || name == ".yaml" || name == ".yml" {
        // A hidden file would be written but never read back: refuse it rather than lose it.
        return Err(format!(
            "'{name}' is hidden (starts with '.'); the loader would not read it back"
        ));
    }
    Ok(())
}

/// Makes the rule files in `dir` exactly `files`, each replaced atomically.
///
/// Every new file is written and flushed before the first rename, so an error while writing
/// (a full disk, a read-only mount) leaves the directory as it was.
pub fn write_set(dir: &Path, files: &[SourceFile]) -> io::Result<()> {
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let result = stage(dir, files, &mut staged);
    if let Err(e) = result {
        for (tmp, _) in &staged {
            let _ = fs::remove_file(tmp);
        }
        return Err(e);
    }
    for (i, (tmp, target)) in staged.iter().enumerate() {
        if let Err(e) = fs::rename(tmp, target) {
            for (left, _) in &staged[i..] {
                let _ = fs::remove_file(left);
            }
            return Err(e);
        }
    }
    let keep: BTreeSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if is_rule_file_name(&name) && !keep.contains(name.as_str()) && !entry.file_type()?.is_dir()
        {
            fs::remove_file(entry.path())?;
        }
    }
    sync_dir(dir)
}

/// Writes the files whose bytes differ into hidden temporary files, flushed to disk.
fn stage(dir: &Path, files: &[SourceFile], staged: &mut Vec<(PathBuf, PathBuf)>) -> io::Result<()> {
    for file in files {
        let target = dir.join(&file.name);
        if target.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is a directory", target.display()),
            ));
        }
        if fs::read(&target).is_ok_and(|old| old == file.bytes) && !is_symlink(&target) {
            continue;
        }
        let tmp = dir.join(format!(".{}.rebound-tmp", file.name));
        let mut out = File::create(&tmp)?;
        staged.push((tmp, target));
        out.write_all(&file.bytes)?;
        out.sync_all()?;
    }
    Ok(())
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Flushes the directory entry changes (renames, removals) to disk.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_yaml_names_only() {
        for ok in [
            "a.yaml",
            "10-payment.yml",
            "x..y.yaml".replace("..", ".").as_str(),
        ] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "../x.yaml",
            "a/b.yaml",
            "..",
            "a..yaml",
            "x.json",
            ".hidden.yaml",
            ".yaml",
            "a\\b.yaml",
            "",
            "a\n.yaml",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn writes_the_set_and_removes_rule_files_it_does_not_have() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("old.yaml"), "x").unwrap();
        fs::write(p.join("notes.txt"), "kept").unwrap();
        fs::create_dir(p.join("tests")).unwrap();
        let files = vec![
            SourceFile::new("a.yaml", "a.yaml", "A"),
            SourceFile::new("b.yml", "b.yml", "B"),
        ];
        write_set(p, &files).unwrap();
        let mut names: Vec<String> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.yaml", "b.yml", "notes.txt", "tests"]);
        assert_eq!(fs::read_to_string(p.join("a.yaml")).unwrap(), "A");
    }

    #[test]
    fn leaves_files_that_are_already_right_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("a.yaml"), "A").unwrap();
        let before = fs::metadata(p.join("a.yaml")).unwrap();
        write_set(p, &[SourceFile::new("a.yaml", "a.yaml", "A")]).unwrap();
        let after = fs::metadata(p.join("a.yaml")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(before.ino(), after.ino());
        }
        let _ = (before, after);
    }
}
