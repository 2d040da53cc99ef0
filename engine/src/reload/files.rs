//! Writing a whole rule set into its directory so that it survives a restart.
//!
//! Each file goes to a hidden temporary file first (the loader never reads hidden files),
//! is flushed to disk, and is then renamed over its final name; rule files that the new set
//! does not have are removed; finally the directory itself is flushed so the renames are
//! durable. Files whose bytes are already right are left alone, so writing the set that is
//! already there touches nothing and wakes no watcher.
//!
//! The temporary name holds the final one, so a name the file system refuses (too long for
//! it, a character it does not allow) fails while staging, before anything is renamed.

use crate::load::{SourceFile, is_rule_file_name};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What a file's temporary name adds around its name: `.NAME.rebound-tmp`.
const TMP_PREFIX: &str = ".";
const TMP_SUFFIX: &str = ".rebound-tmp";

/// The longest pushed file name, in bytes: 255 (a name's limit on Linux's and macOS's file
/// systems) less what the temporary name adds, so that the temporary name fits too.
pub(crate) const MAX_NAME_BYTES: usize = 255 - TMP_PREFIX.len() - TMP_SUFFIX.len();

/// How an error message shows a name: whole when short, else its start and its length.
pub(super) fn shown(name: &str) -> String {
    const SHOWN: usize = 40;
    match name.char_indices().nth(SHOWN) {
        None => name.to_string(),
        Some((end, _)) => format!("{}… ({} bytes)", &name[..end], name.len()),
    }
}

/// Why a pushed file name is refused: names must be plain `*.yaml`/`*.yml` file names that
/// the rules directory can hold. Every source of a set that is not read from the directory
/// (a push, a dry run, a pull) goes through this one check.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a file name must not be empty".to_string());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "'{}' is too long: a file name can be at most {MAX_NAME_BYTES} bytes",
            shown(name)
        ));
    }
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
    if let Some(c) = name.chars().find(|&c| c.is_control() || is_bidi_control(c)) {
        let what = if c.is_control() {
            "a control character"
        } else {
            // A right-to-left override makes `evil\u{202e}lmay.yaml` read as `evilyaml.yaml`.
            "a bidirectional formatting character"
        };
        return Err(format!(
            "'{}' contains {what} (U+{:04X}); a file name must be plain visible text",
            name.escape_default(),
            u32::from(c)
        ));
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

/// The characters that reorder how text around them is shown (Unicode's bidirectional
/// formatting characters): marks, embeddings, overrides and isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Why a set could not be written into its directory.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The directory cannot hold a file under this name (too long for its file system, a
    /// character it refuses, a directory already there): the name is to blame, and nothing
    /// was changed.
    #[error(
        "'{}' cannot be written into the rules directory: {source}",
        shown(file)
    )]
    Name {
        /// The pushed name.
        file: String,
        /// What the file system said.
        source: io::Error,
    },
    /// Anything else: a full disk, a read-only mount, a missing directory.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl WriteError {
    /// The I/O error underneath.
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            WriteError::Name { source, .. } | WriteError::Io(source) => source,
        }
    }
}

/// Makes the rule files in `dir` exactly `files`, each replaced atomically.
///
/// Every new file is written and flushed before the first rename, so an error while writing
/// (a full disk, a read-only mount, a name the file system refuses) leaves the directory as
/// it was.
pub(crate) fn write_set(dir: &Path, files: &[SourceFile]) -> Result<(), WriteError> {
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
            return Err(e.into());
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
    Ok(sync_dir(dir)?)
}

/// Writes the files whose bytes differ into hidden temporary files, flushed to disk.
fn stage(
    dir: &Path,
    files: &[SourceFile],
    staged: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(), WriteError> {
    for file in files {
        let name_error = |source| WriteError::Name {
            file: file.name.clone(),
            source,
        };
        let target = dir.join(&file.name);
        if target.is_dir() {
            return Err(name_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is a directory", target.display()),
            )));
        }
        if fs::read(&target).is_ok_and(|old| old == file.bytes) && !is_symlink(&target) {
            continue;
        }
        let tmp = dir.join(format!("{TMP_PREFIX}{}{TMP_SUFFIX}", file.name));
        let mut out = File::create(&tmp).map_err(|e| {
            if refuses_the_name(&e) {
                name_error(e)
            } else {
                WriteError::Io(e)
            }
        })?;
        staged.push((tmp, target));
        out.write_all(&file.bytes)?;
        out.sync_all()?;
    }
    Ok(())
}

/// Whether creating a file failed because of its name rather than the directory or disk.
fn refuses_the_name(e: &io::Error) -> bool {
    // Too long for this file system (ENAMETOOLONG: eCryptfs allows 143 bytes), or a character
    // it does not allow (EINVAL: vfat and `:`).
    matches!(
        e.kind(),
        io::ErrorKind::InvalidFilename | io::ErrorKind::InvalidInput
    )
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
            "a\0.yaml",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names_with_control_or_bidi_characters_are_refused_and_shown_escaped() {
        for (bad, code) in [
            ("evil\u{202E}lmay.yaml", "U+202E"),
            ("a\u{200E}.yaml", "U+200E"),
            ("a\u{200F}.yaml", "U+200F"),
            ("a\u{2066}b.yaml", "U+2066"),
            ("a\u{2069}b.yaml", "U+2069"),
            ("a\u{061C}b.yaml", "U+061C"),
            ("a\u{202A}b.yaml", "U+202A"),
            ("a\u{1B}[31m.yaml", "U+001B"),
            ("a\u{85}b.yaml", "U+0085"),
            ("a\u{9F}b.yaml", "U+009F"),
        ] {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains(code), "{bad:?}: {err}");
            assert!(
                !err.contains(|c: char| c.is_control() || is_bidi_control(c)),
                "the name is shown escaped: {err:?}"
            );
        }
        let err = check_name("evil\u{202E}lmay.yaml").unwrap_err();
        assert!(err.contains("bidirectional formatting character"), "{err}");
        // Letters of right-to-left scripts are names like any other.
        assert!(check_name("\u{5E9}\u{5DC}\u{5D5}\u{5DD}.yaml").is_ok());
        assert!(check_name("r\u{E8}gles.yaml").is_ok());
    }

    #[test]
    fn names_are_refused_past_the_limit_and_the_message_says_it() {
        let longest = format!("{}.yaml", "a".repeat(MAX_NAME_BYTES - 5));
        assert!(check_name(&longest).is_ok());
        let long = format!("{}.yaml", "a".repeat(10_000));
        let err = check_name(&long).unwrap_err();
        assert!(
            err.contains(&format!("at most {MAX_NAME_BYTES} bytes")),
            "{err}"
        );
        assert!(err.contains("10005 bytes"), "{err}");
        assert!(err.len() < 200, "the whole name is not echoed: {err}");
        // Multi-byte characters count as their bytes.
        let wide = format!("{}.yaml", "é".repeat(MAX_NAME_BYTES / 2));
        assert!(check_name(&wide).is_err());
        assert_eq!(check_name("").unwrap_err(), "a file name must not be empty");
    }

    #[test]
    fn the_longest_name_and_its_temporary_name_can_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}.yaml", "a".repeat(MAX_NAME_BYTES - 5));
        write_set(dir.path(), &[SourceFile::new(&*name, &*name, "A")]).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join(&name)).unwrap(), "A");
    }

    #[test]
    fn a_name_the_file_system_refuses_is_a_name_error_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("a.yaml"), "old").unwrap();
        // Past check_name's limit, as a file system with a shorter one would see a name.
        let long = format!("{}.yaml", "b".repeat(300));
        let files = [
            SourceFile::new("a.yaml", "a.yaml", "new"),
            SourceFile::new(&*long, &*long, "B"),
        ];
        let err = write_set(p, &files).unwrap_err();
        assert!(
            matches!(&err, WriteError::Name { file, .. } if *file == long),
            "{err:?}"
        );
        fs::create_dir(p.join("d.yaml")).unwrap();
        let err = write_set(p, &[SourceFile::new("d.yaml", "d.yaml", "D")]).unwrap_err();
        assert!(
            matches!(&err, WriteError::Name { file, .. } if file == "d.yaml"),
            "{err:?}"
        );
        let mut names: Vec<String> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.yaml", "d.yaml"], "no temporary file is left");
        assert_eq!(fs::read_to_string(p.join("a.yaml")).unwrap(), "old");
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
