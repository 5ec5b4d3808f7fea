// SPDX-License-Identifier: MIT
//! An await wakes for its value even when another consumer of the same
//! eventfd reads the counter first: a group's drain (or a slot's consume)
//! running between the daemon's signal and the runtime's next look at its
//! epoll. epoll looks at the fd again when it hands the edge over, and an
//! eventfd read back to 0 is no longer readable by then: an await that
//! watched for readability alone never heard of that signal (the grouped
//! awaits of a program that drains on another thread slept with their
//! values landed, for ever once no other signal came).
//!
//! Made deterministic with a current-thread runtime, whose reactor looks
//! at its epoll only while `block_on` runs: the await is parked, the value
//! lands, the daemon rings, the counter is read, and only then does the
//! runtime run again.
#![cfg(feature = "tokio")]

mod support;

use std::future::Future;
use std::os::raw::{c_int, c_short, c_ulong};
use std::os::unix::io::RawFd;
use std::pin::Pin;
use std::time::Duration;

use cuflag::{Client, Slot};
use support::daemon::Daemon;

#[repr(C)]
struct PollFd {
    fd: c_int,
    events: c_short,
    revents: c_short,
}

extern "C" {
    fn poll(fds: *mut PollFd, n: c_ulong, timeout: c_int) -> c_int;
}

/// Wait (without reading it) until the daemon has rung `fd`.
fn rung(fd: RawFd) {
    let mut p = PollFd {
        fd,
        events: 1, // POLLIN
        revents: 0,
    };
    assert_eq!(unsafe { poll(&mut p, 1, 5000) }, 1, "the daemon never rang");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Park `wait` in `rt` (its registration made, its first looks done),
/// have `ring_and_take` land its value and take the doorbell, then run it
/// again: it must end.
fn parked_then_taken(
    rt: &tokio::runtime::Runtime,
    mut wait: Pin<Box<dyn Future<Output = cuflag::Result<()>> + '_>>,
    ring_and_take: impl FnOnce(),
) {
    let parked =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(50), wait.as_mut()).await });
    assert!(parked.is_err(), "nothing landed yet");
    ring_and_take();
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), wait.as_mut()).await })
        .expect("the await never woke for its value")
        .unwrap();
}

#[test]
fn a_grouped_await_wakes_though_a_drain_took_the_doorbell() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let g = c.group().unwrap();
    let s: Slot = g.acquire().unwrap();
    let rt = runtime();
    for _ in 0..3 {
        let t = s.arm().unwrap();
        parked_then_taken(&rt, Box::pin(s.wait_async(t)), || {
            s.store(t);
            rung(g.fd());
            assert_eq!(g.drain().unwrap(), vec![(s.id(), 1)]);
        });
    }
}

#[test]
fn an_await_wakes_though_a_consume_took_the_doorbell() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = c.acquire().unwrap();
    let rt = runtime();
    for _ in 0..3 {
        let t = s.arm().unwrap();
        parked_then_taken(&rt, Box::pin(s.wait_async(t)), || {
            s.store(t);
            rung(s.fd().unwrap());
            assert_eq!(s.consume().unwrap(), 1);
        });
    }
}
