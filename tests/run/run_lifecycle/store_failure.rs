//! `rebound run` on a data directory that fills up: the journal retries the store for
//! `--store-give-up`, then the run exits 2 naming the file and the cause; a restart with room
//! finishes with lost 0; SIGTERM during the failing retries stops it within the stop timeout.
//!
//! The full disk is a real one: a small tmpfs, mounted for the test (so the test runs as root,
//! as CI does; it fails, not skips, when it cannot mount).

use crate::support::{Running, report, run_cmd, shipped_rules, wait_until};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmpfs mounted on a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "cannot mount a tmpfs on {} ({status}): this test needs root, as CI has",
            dir.path().display()
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn resize(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "remount: {status}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn data(fs: &Tmpfs) -> PathBuf {
    fs.path().join("data")
}

fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// Waits for the child to exit, at most `limit`; its output.
fn exits_within(mut child: Running, limit: Duration) -> std::process::Output {
    let exited = wait_until(limit, || child.exited());
    let out = if exited { child.wait() } else { child.kill9() };
    assert!(
        exited,
        "still running after {limit:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_full_disk_stops_the_run_with_the_cause_and_a_restart_with_room_loses_nothing() {
    let fs = Tmpfs::mount("3m");
    let mut cmd = run_cmd(&data(&fs), &shipped_rules(), 20_000, 100.0);
    cmd.args(["--store-give-up", "2s"]);
    let started = Instant::now();
    let out = exits_within(Running::spawn(cmd), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    let db = data(&fs).join("rebound.db").display().to_string();
    assert!(
        stderr.contains(&format!("error: {db} cannot be written: "))
            && stderr.contains("database or disk is full"),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("retrying"),
        "each failure is logged: {stderr}"
    );
    // Gave up after its bound, not before (the time to fill 3 MiB comes on top).
    assert!(started.elapsed() >= Duration::from_secs(2));

    fs.resize("400m");
    let cmd = run_cmd(&data(&fs), &shipped_rules(), 20_000, 100.0);
    let out = exits_within(Running::spawn(cmd), Duration::from_secs(180));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report(&out);
    assert_eq!(report["lost"], 0, "{report}");
    assert_eq!(report["emitted"], 20_000, "{report}");
    assert_eq!(report["complete"], true, "{report}");
}

#[test]
fn sigterm_during_the_failing_retries_stops_the_run_and_a_second_stops_it_at_once() {
    for second in [false, true] {
        let fs = Tmpfs::mount("3m");
        let mut cmd = run_cmd(&data(&fs), &shipped_rules(), 20_000, 100.0);
        cmd.args(["--store-give-up", "10m"]);
        let child = Running::spawn(cmd);
        let pid = child.id();
        // The disk is full once the store refuses a commit; the data directory says so first.
        let full = wait_until(Duration::from_secs(60), || {
            free_bytes(fs.path()).is_some_and(|free| free < 64 * 1024)
        });
        assert!(full, "the tmpfs never filled up");
        std::thread::sleep(Duration::from_millis(500));
        sigterm(pid);
        if second {
            std::thread::sleep(Duration::from_millis(300));
            sigterm(pid);
        }
        // The stop timeout is 10 s; the rest is slack for a loaded machine.
        let out = exits_within(child, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if second {
            assert_eq!(out.status.code(), Some(130), "stderr:\n{stderr}");
            assert!(stderr.contains("stopping at once"), "stderr:\n{stderr}");
        } else {
            // The graceful stop cannot commit its last writes: it gives up after the stop
            // timeout, with the reason, rather than hang.
            assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
            assert!(stderr.contains("stopping:"), "stderr:\n{stderr}");
            assert!(
                stderr.contains("the stop did not finish within 10 s"),
                "stderr:\n{stderr}"
            );
        }
    }
}

/// Free bytes on the file system holding `path`, from `df`.
fn free_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}
