//! The directory watcher: every way of saving ends in the right version, a burst of writes
//! is one reload, and a push is never seen half-written.

use crate::support::*;
use rebound_engine::load::{SourceFile, version_of};
use rebound_engine::reload::{Outcome, ReloadOptions, Reloader, Source, WatchOptions, Watcher};
use std::fs;
use std::sync::Arc;
use std::time::Duration;

struct Watched {
    dir: tempfile::TempDir,
    reloader: Arc<Reloader>,
    _watcher: Watcher,
}

fn watch(dir: tempfile::TempDir, debounce_ms: u64) -> Watched {
    let reloader = Arc::new(Reloader::open(dir.path(), ReloadOptions::default()).unwrap());
    let options = WatchOptions {
        debounce: Duration::from_millis(debounce_ms),
        ..WatchOptions::default()
    };
    let watcher = Watcher::spawn(Arc::clone(&reloader), options).unwrap();
    Watched {
        dir,
        reloader,
        _watcher: watcher,
    }
}

impl Watched {
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn reaches(&self, version: &rebound_engine::Version) -> bool {
        eventually(|| self.reloader.handle().current().version() == version)
    }

    fn file_reloads(&self) -> Vec<rebound_engine::reload::HistoryEntry> {
        // The first `file` entry is the start-up load.
        entries_from(&self.reloader, Source::File)
            .into_iter()
            .skip(1)
            .collect()
    }
}

fn slow_text() -> String {
    files_of("slow")["10-payment.yaml"].clone()
}

#[test]
fn a_save_by_temporary_file_and_rename_is_reloaded() {
    let w = watch(rules_dir_with("fast"), 150);
    let tmp = w.path("10-payment.yaml.tmp~");
    fs::write(&tmp, slow_text()).unwrap();
    fs::rename(&tmp, w.path("10-payment.yaml")).unwrap();
    assert!(w.reaches(&version_of_fixture("slow")));
    assert_eq!(payment_delay_ms(&w.reloader), Some(200));
}

#[test]
fn an_in_place_truncating_save_is_reloaded() {
    let w = watch(rules_dir_with("fast"), 150);
    fs::write(w.path("10-payment.yaml"), slow_text()).unwrap();
    assert!(w.reaches(&version_of_fixture("slow")));
}

#[test]
fn deleting_a_file_is_reloaded() {
    let w = watch(rules_dir_with("pair-a"), 150);
    fs::remove_file(w.path("b.yaml")).unwrap();
    let only_a = SourceFile::new("a.yaml", "a.yaml", files_of("pair-a")["a.yaml"].clone());
    assert!(w.reaches(&version_of(&[only_a])));
}

#[test]
fn a_broken_save_keeps_the_current_set_and_the_fix_is_reloaded() {
    let w = watch(rules_dir_with("fast"), 150);
    fs::write(
        w.path("10-payment.yaml"),
        &files_of("broken")["10-payment.yaml"],
    )
    .unwrap();
    assert!(eventually(|| w
        .file_reloads()
        .iter()
        .any(|e| e.outcome == Outcome::Rejected)));
    assert_eq!(payment_delay_ms(&w.reloader), Some(100));
    fs::write(w.path("10-payment.yaml"), slow_text()).unwrap();
    assert!(w.reaches(&version_of_fixture("slow")));
}

#[test]
fn ten_writes_in_fifty_milliseconds_are_one_reload() {
    // A wide quiet period, so that a busy machine pausing the writer between two writes
    // does not split the burst.
    let w = watch(rules_dir_with("fast"), 400);
    let target = w.path("10-payment.yaml");
    let mut last = String::new();
    for i in 0..10 {
        last = format!("{}# save {i}\n", slow_text());
        fs::write(&target, &last).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let expected = version_of(&[SourceFile::new("10-payment.yaml", "", last)]);
    assert!(w.reaches(&expected));
    // Give a stray second reload every chance to show up before counting.
    std::thread::sleep(Duration::from_millis(1_200));
    let reloads = w.file_reloads();
    assert_eq!(reloads.len(), 1, "{reloads:#?}");
    assert_eq!(reloads[0].outcome, Outcome::Accepted);
    assert_eq!(reloads[0].version, expected);
}

#[cfg(unix)]
#[test]
fn a_configmap_style_symlink_swap_is_reloaded() {
    use std::os::unix::fs::symlink;
    // The kubelet's layout: NAME -> ..data/NAME, ..data -> ..TIMESTAMP/.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let write_generation = |generation: &str, text: &str| {
        fs::create_dir(p.join(generation)).unwrap();
        fs::write(p.join(generation).join("10-payment.yaml"), text).unwrap();
    };
    write_generation(
        "..2024_01_01_00_00_00.1",
        &files_of("fast")["10-payment.yaml"],
    );
    symlink("..2024_01_01_00_00_00.1", p.join("..data")).unwrap();
    symlink("..data/10-payment.yaml", p.join("10-payment.yaml")).unwrap();
    let w = watch(dir, 150);
    assert_eq!(payment_delay_ms(&w.reloader), Some(100));

    // An update: a new generation, a temporary link to it renamed over ..data, the old
    // generation removed. The NAME link itself never changes.
    write_generation("..2024_01_01_00_05_00.2", &slow_text());
    symlink("..2024_01_01_00_05_00.2", p.join("..data_tmp")).unwrap();
    fs::rename(p.join("..data_tmp"), p.join("..data")).unwrap();
    fs::remove_dir_all(p.join("..2024_01_01_00_00_00.1")).unwrap();
    assert!(w.reaches(&version_of_fixture("slow")));
}

#[test]
fn the_watcher_never_loads_half_a_push_and_its_echo_is_a_no_op() {
    // Any mix of pair A's and pair B's files defines a rule twice, so a watcher that read
    // the directory halfway through a push would record a rejected `file` reload.
    let w = watch(rules_dir_with("pair-a"), 50);
    for i in 0..30 {
        let name = if i % 2 == 0 { "pair-b" } else { "pair-a" };
        w.reloader.push(files_of(name), None, Source::Push).unwrap();
        std::thread::sleep(Duration::from_millis(i % 4 * 20));
    }
    // Let the watcher catch up with the echoes of the last writes.
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(
        w.file_reloads(),
        [],
        "the watcher only ever saw whole pushes"
    );
    assert_eq!(
        w.reloader.handle().current().version(),
        &version_of_fixture("pair-a")
    );
    assert!(
        w.reloader
            .history()
            .iter()
            .all(|e| e.outcome == Outcome::Accepted)
    );
}

#[test]
fn stopping_the_watcher_stops_reloads() {
    let dir = rules_dir_with("fast");
    let reloader = Arc::new(Reloader::open(dir.path(), ReloadOptions::default()).unwrap());
    let watcher = Watcher::spawn(Arc::clone(&reloader), WatchOptions::default()).unwrap();
    watcher.stop();
    fs::write(dir.path().join("10-payment.yaml"), slow_text()).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(payment_delay_ms(&reloader), Some(100));
}
