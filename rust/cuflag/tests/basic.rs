// SPDX-License-Identifier: MIT
//! The blocking API against the real daemon: slots, counts, groups, errors.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use cuflag::{errno, Client, Error, Group, Slot};
use support::daemon::Daemon;

/// What the crate promises about threads, checked by the compiler.
#[allow(dead_code)]
fn assert_send_sync() {
    fn both<T: Send + Sync>() {}
    fn clone<T: Clone>() {}
    both::<Client>();
    both::<Slot>();
    both::<Group>();
    both::<Error>();
    clone::<Client>();
}

#[test]
fn arm_store_wait_consume() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = c.acquire().unwrap();
    assert_eq!(s.consume().unwrap(), 0, "no completion yet");
    let t1 = s.arm().unwrap();
    let t2 = s.arm().unwrap();
    assert_eq!(t2, t1.wrapping_add(1), "values are handed out in order");
    let err = s.wait(t1, Some(Duration::from_millis(20))).unwrap_err();
    assert!(err.is_timeout(), "{}", err);
    assert_eq!(err.errno(), errno::ETIMEDOUT);
    std::thread::scope(|sc| {
        sc.spawn(|| s.store(t2));
    });
    s.wait(t2, None).unwrap();
    s.wait(t1, Some(Duration::ZERO)).unwrap();
    assert!(s.reached(t2));
    // Wait leaves the counts to consume; both completions are counted once.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    while n < 2 {
        n += s.consume().unwrap();
        assert!(Instant::now() < deadline, "counted {} of 2", n);
        std::thread::yield_now();
    }
    assert_eq!(n, 2);
    assert_eq!(s.consume().unwrap(), 0);
}

#[test]
fn wait_for_a_value_never_armed_is_einval() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = c.acquire().unwrap();
    let t = s.arm().unwrap();
    let e = s.wait(t.wrapping_add(5), None).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL, "{}", e);
}

#[test]
fn acquire_many_gives_distinct_slots() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let slots = c.acquire_many(100).unwrap();
    let mut ids: Vec<u32> = slots.iter().map(|s| s.id()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 100);
    assert!(slots.iter().all(|s| s.fd().unwrap() >= 0));
    assert_eq!(c.acquire_many(0).unwrap_err().errno(), errno::EINVAL);
}

#[test]
fn the_client_outlives_its_handles() {
    let d = Daemon::start(&[]);
    let s = {
        let c = Client::connect(Some(&d.socket)).unwrap();
        let c2 = c.clone();
        drop(c);
        c2.acquire().unwrap()
    };
    // Every Client is gone; the slot still works on the connection.
    let t = s.arm().unwrap();
    s.store(t);
    s.wait(t, Some(Duration::from_secs(10))).unwrap();
}

#[test]
fn group_drain_names_slots_and_counts() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let g = c.group().unwrap();
    assert!(g.drain().unwrap().is_empty());
    let slots = g.acquire_many(10).unwrap();
    assert_eq!(slots[0].fd().unwrap_err().errno(), errno::EOPNOTSUPP);
    for s in &slots {
        let t = s.arm().unwrap();
        s.store(t);
    }
    let mut left: Vec<u32> = slots.iter().map(|s| s.id()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !left.is_empty() {
        for (id, n) in g.drain().unwrap() {
            assert_eq!(n, 1);
            let i = left
                .iter()
                .position(|&x| x == id)
                .expect("a slot of the group, once");
            left.swap_remove(i);
        }
        assert!(
            Instant::now() < deadline,
            "{} slots never drained",
            left.len()
        );
        std::thread::yield_now();
    }
    assert!(g.drain().unwrap().is_empty());
    // The group lives on while its slots do.
    drop(g);
    let t = slots[3].arm().unwrap();
    slots[3].store(t);
    slots[3].wait(t, Some(Duration::from_secs(10))).unwrap();
}

#[test]
fn a_missing_socket_is_enoent() {
    let e = Client::connect(Some("/nonexistent/cuflagd.sock")).unwrap_err();
    assert_eq!(e.errno(), errno::ENOENT, "{}", e);
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("cuflag_connect"), "{}", e);
    assert!(
        e.hint().is_some(),
        "the library says what to do about ENOENT"
    );
    assert!(e.to_string().contains(e.hint().unwrap()), "{}", e);
    // What a program prints says which socket and what to do, Display
    // and Debug (what `main() -> Result` prints) alike.
    assert_eq!(e.socket(), Some("/nonexistent/cuflagd.sock"));
    assert!(
        e.to_string()
            .starts_with("cuflag_connect /nonexistent/cuflagd.sock: "),
        "{}",
        e
    );
    let debug = format!("{:?}", e);
    assert!(debug.contains("/nonexistent/cuflagd.sock"), "{}", debug);
    assert!(debug.contains(e.hint().unwrap()), "{}", debug);
    // Another thread's failed connect leaves this error's hint as it was.
    let hint = e.hint();
    std::thread::spawn(|| Client::connect(Some("/nonexistent/dir/")).unwrap_err())
        .join()
        .unwrap();
    assert_eq!(e.hint(), hint);
    let long = "/nonexistent/".to_string() + &"x".repeat(200);
    let cut = Client::connect(Some(&long)).unwrap_err();
    assert!(cut.to_string().contains("xxx...: "), "{}", cut);
    let io: std::io::Error = e.into();
    assert_eq!(io.raw_os_error(), Some(errno::ENOENT));
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
    assert!(!boxed.to_string().is_empty());
    let nul = Client::connect(Some("bad\0path")).unwrap_err();
    assert_eq!(nul.errno(), errno::EINVAL);
}

#[test]
fn a_socket_nobody_listens_on_is_econnrefused() {
    let mut d = Daemon::start(&[]);
    let path = d.socket.clone();
    d.kill();
    let e = Client::connect(Some(&path)).unwrap_err();
    assert_eq!(e.errno(), errno::ECONNREFUSED, "{}", e);
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    d.restart();
}

#[test]
fn the_slot_limit_is_enospc() {
    let d = Daemon::start(&["--slots-per-client", "4"]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let _held = c.acquire_many(4).unwrap();
    let e = c.acquire().unwrap_err();
    assert_eq!(e.errno(), errno::ENOSPC, "{}", e);
}

#[test]
fn arm_many_and_complete() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = c.acquire().unwrap();
    let first = s.arm_many(10).unwrap();
    let last = first.wrapping_add(9);
    assert_eq!(
        s.complete(last.wrapping_add(1)).unwrap_err().errno(),
        errno::EINVAL
    );
    s.complete(last).unwrap();
    s.wait(last, Some(Duration::from_secs(10))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    while n < 10 {
        n += s.consume().unwrap();
        assert!(Instant::now() < deadline, "counted {} of 10", n);
        std::thread::yield_now();
    }
    assert_eq!(n, 10);
    assert_eq!(s.arm_many(0).unwrap_err().errno(), errno::EINVAL);
}

/// A drain of a group bigger than one library batch, while a thread keeps
/// completing its slots: a slot that completed again between the batches
/// comes once per drain, its counts summed, and every completion once.
#[test]
fn a_drain_names_each_slot_once() {
    const SLOTS: usize = 3000;
    const ROUNDS: u64 = 20;
    let d = Daemon::start(&["--slots-per-client", "4096", "--max-slots-per-uid", "100000"]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let g = c.group().unwrap();
    let slots = g.acquire_many(SLOTS).unwrap();
    let mut counted: HashMap<u32, u64> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..ROUNDS {
                for s in &slots {
                    s.store(s.arm().unwrap());
                }
            }
        });
        let mut total = 0;
        while total < SLOTS as u64 * ROUNDS {
            let mut seen = HashSet::new();
            for (id, n) in g.drain().unwrap() {
                assert!(seen.insert(id), "slot {} twice in one drain", id);
                assert!(n > 0);
                *counted.entry(id).or_insert(0) += n;
                total += n;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {} completions drained",
                total,
                SLOTS as u64 * ROUNDS
            );
        }
    });
    assert_eq!(counted.len(), SLOTS);
    assert!(counted.values().all(|&n| n == ROUNDS), "a slot counted twice");
    assert!(g.drain().unwrap().is_empty());
}

#[test]
fn version_is_the_library_s() {
    let v = cuflag::library_version();
    assert_eq!(v.split('.').count(), 3, "{}", v);
    assert_eq!(cuflag::version(), v, "the earlier name says the same");
}
