//! Running the real `tlspec` binary from tests, with its wall time and peak memory measured
//! (`wait4`'s resource usage), so tests can enforce bounds on hostile input.
#![allow(dead_code)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one run of `tlspec` did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// Peak resident memory of the process, in bytes.
    pub max_rss: u64,
}

impl Run {
    /// The JSON the run printed (`--json` runs).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.stdout))
    }
}

/// A folder for one test's files, under cargo's test scratch space.
pub fn scratch(name: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("tlspec-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("scratch folder");
    folder
}

/// Runs `tlspec` with `args`, killing it after `limit`. Output goes through files, so a large
/// output cannot block the child.
pub fn tlspec(args: &[&str], limit: Duration) -> Run {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tlspec-cli-runs");
    std::fs::create_dir_all(&folder).expect("runs folder");
    let unique = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let out_path = folder.join(format!("{unique}.out"));
    let err_path = folder.join(format!("{unique}.err"));
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_tlspec"))
        .args(args)
        // One compiled-component cache for every run of the test suite.
        .env(
            "TORCHLENS_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"),
        )
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("tlspec starts");
    let pid = child.id() as libc::pid_t;
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: probing with signal 0 only asks whether the process still exists.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return false;
            }
        }
        // SAFETY: pid is our own child, not yet reaped (the waiter below reaps it).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        true
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child and fills the two out-parameters.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 on the tlspec child");
    let wall = started.elapsed();
    let killed = watchdog.join().unwrap_or(false);
    std::mem::forget(child);
    let exit = std::process::ExitStatus::from_raw(status);
    assert!(!killed, "tlspec {args:?} ran past {limit:?} and was killed");
    let code = exit
        .code()
        .unwrap_or_else(|| panic!("tlspec {args:?} died by signal {:?}", exit.signal()));
    Run {
        code,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        wall,
        max_rss: usage.ru_maxrss as u64 * 1024,
    }
}
