// SPDX-License-Identifier: MIT
//! The real cuflagd for a test: `$CUFLAGD` (set by meson), else the meson
//! build of this tree (`build/daemon/cuflagd`), on a socket in a directory
//! of its own; ready once a client connects (never a sleep); killed with
//! the thread that started it (PR_SET_PDEATHSIG), so a crashed test leaves
//! no daemon behind.
#![allow(dead_code)]

use std::os::raw::{c_int, c_ulong};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(10);
const PR_SET_PDEATHSIG: c_int = 1;
const SIGKILL: c_int = 9;
const SIGTERM: c_int = 15;

extern "C" {
    fn prctl(option: c_int, arg2: c_ulong, ...) -> c_int;
    fn kill(pid: c_int, sig: c_int) -> c_int;
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

fn binary() -> PathBuf {
    match std::env::var_os("CUFLAGD") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/daemon/cuflagd"),
    }
}

pub struct Daemon {
    child: Option<Child>,
    pub dir: PathBuf,
    pub socket: String,
    args: Vec<String>,
}

impl Daemon {
    /// A daemon with these extra options, on a socket of its own.
    pub fn start(args: &[&str]) -> Daemon {
        let dir = std::env::temp_dir().join(format!(
            "cuflag-rust-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("test directory");
        let socket = dir
            .join("cuflagd.sock")
            .to_str()
            .expect("utf-8 path")
            .to_string();
        let mut d = Daemon {
            child: None,
            dir,
            socket,
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(binary());
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--log-level")
            .arg("warning")
            .args(&self.args);
        unsafe {
            cmd.pre_exec(|| {
                prctl(PR_SET_PDEATHSIG, SIGKILL as c_ulong);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {} (set CUFLAGD)", binary().display(), e));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if cuflag::Client::connect(Some(&self.socket)).is_ok() {
                break;
            }
            if let Some(st) = child.try_wait().expect("waitpid") {
                panic!("cuflagd exited before it was ready ({})", st);
            }
            assert!(Instant::now() < deadline, "cuflagd did not become ready");
            std::thread::sleep(Duration::from_micros(500));
        }
        self.child = Some(child);
    }

    fn signal(&mut self, sig: c_int) -> ExitStatus {
        let mut child = self.child.take().expect("the daemon runs");
        unsafe { kill(child.id() as c_int, sig) };
        child.wait().expect("waitpid")
    }

    /// The running daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon runs").id()
    }

    /// SIGTERM and wait: its exit status.
    pub fn stop(&mut self) -> ExitStatus {
        self.signal(SIGTERM)
    }

    /// SIGKILL and wait: the daemon goes without a word to its clients.
    pub fn kill(&mut self) {
        self.signal(SIGKILL);
    }

    /// Start the next daemon on the same socket (after stop or kill).
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// A restart: SIGKILL (`kill`) or SIGTERM, no daemon for `away`, then
    /// the next one on the same socket, ready.
    pub fn bounce(&mut self, kill: bool, away: Duration) {
        if kill {
            self.kill();
        } else {
            let st = self.stop();
            assert!(st.success(), "cuflagd exited with {}", st);
        }
        std::thread::sleep(away);
        self.restart();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            let st = self.stop();
            if !std::thread::panicking() {
                assert!(st.success(), "cuflagd exited with {}", st);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Open fds of this process (for leak checks in a test binary of one test).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
        - 1
}
