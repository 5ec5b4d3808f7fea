// SPDX-License-Identifier: MIT
//! What drops release, and what a child of fork(2) may do with what it
//! inherited. One test in this binary, so that the fd count is its own.

mod support;

use std::os::raw::c_int;
use std::time::Duration;

use cuflag::{errno, Client};
use support::daemon::{open_fds, Daemon};

extern "C" {
    fn fork() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
}

/// In the child: 0 when every call on the parent's client and slot
/// answered ECHILD, else the step that did not.
fn child(c: &Client, s: &cuflag::Slot) -> c_int {
    if c.acquire().map(|_| ()).unwrap_err().errno() != errno::ECHILD {
        return 1;
    }
    if s.arm().unwrap_err().errno() != errno::ECHILD {
        return 2;
    }
    if s.consume().unwrap_err().errno() != errno::ECHILD {
        return 3;
    }
    if s.wait(1, Some(Duration::from_millis(1)))
        .unwrap_err()
        .errno()
        != errno::ECHILD
    {
        return 4;
    }
    0
}

#[test]
fn drops_release_everything_and_a_child_gets_echild() {
    let d = Daemon::start(&[]);
    // tokio's signal driver (feature signal) opens a pipe for the life of
    // the process at the first runtime: made before counting.
    #[cfg(feature = "tokio")]
    drop(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    );
    let fds = open_fds();
    {
        let c = Client::connect(Some(&d.socket)).unwrap();
        let slots = c.acquire_many(40).unwrap();
        let g = c.group().unwrap();
        let grouped = g.acquire_many(40).unwrap();
        assert!(open_fds() > fds + 40, "each slot has an eventfd");

        // Registered with a runtime's reactor, then dropped with it.
        #[cfg(feature = "tokio")]
        {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                for s in slots.iter().chain(grouped.iter().take(1)) {
                    let t = s.arm().unwrap();
                    s.store(t);
                    tokio::time::timeout(Duration::from_secs(20), s.wait_async(t))
                        .await
                        .unwrap()
                        .unwrap();
                }
                assert!(
                    !tokio::time::timeout(Duration::from_secs(20), g.drain_async())
                        .await
                        .unwrap()
                        .unwrap()
                        .is_empty()
                );
            });
        }

        // The child may free its copies only; the parent's slot goes on.
        let pid = unsafe { fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let rc = child(&c, &slots[0]);
            drop(slots);
            unsafe { _exit(rc) }
        }
        let mut st: c_int = 0;
        assert_eq!(unsafe { waitpid(pid, &mut st, 0) }, pid);
        assert_eq!(st, 0, "the child's step {} did not answer ECHILD", st >> 8);
        let t = slots[0].arm().unwrap();
        slots[0].store(t);
        slots[0].wait(t, Some(Duration::from_secs(20))).unwrap();
    }
    assert_eq!(open_fds(), fds, "fds leaked");
}
