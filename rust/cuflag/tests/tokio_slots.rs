// SPDX-License-Identifier: MIT
//! Slots awaited by tokio tasks, completed by a plain thread (the simulated
//! device), through the real daemon: every count exact.
#![cfg(feature = "tokio")]

mod support;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use cuflag::{errno, Client, Slot};
use support::daemon::Daemon;

const LONG: Duration = Duration::from_secs(20);

/// The futures are Send, so that a multi-threaded runtime may move them.
#[allow(dead_code)]
fn futures_are_send(c: &Client, s: &Slot) {
    fn send<T: Send>(_: &T) {}
    send(&s.wait_async(1));
    send(&s.completions());
    let g = c.group().unwrap();
    send(&g.drain_async());
}

/// The device: a plain thread that stores every (slot, value) it is handed.
fn device() -> (mpsc::Sender<(Arc<Slot>, u32)>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<(Arc<Slot>, u32)>();
    let t = std::thread::spawn(move || {
        for (slot, value) in rx {
            slot.store(value);
        }
    });
    (tx, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_await_sixty_four_slots() {
    const ROUNDS: u64 = 200;
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let slots: Vec<Arc<Slot>> = c
        .acquire_many(64)
        .unwrap()
        .into_iter()
        .map(Arc::new)
        .collect();
    let (tx, dev) = device();
    let mut tasks = Vec::new();
    for s in &slots {
        let (s, tx) = (s.clone(), tx.clone());
        tasks.push(tokio::spawn(async move {
            let mut counted = 0;
            for _ in 0..ROUNDS {
                let t = s.arm().unwrap();
                tx.send((s.clone(), t)).unwrap();
                tokio::time::timeout(LONG, s.wait_async(t))
                    .await
                    .expect("landed")
                    .unwrap();
                assert!(s.reached(t));
                counted += s.consume().unwrap();
            }
            // Those signalled after their consume: no more, no fewer.
            while counted < ROUNDS {
                counted += tokio::time::timeout(LONG, s.completions())
                    .await
                    .expect("counted")
                    .unwrap();
            }
            assert_eq!(s.consume().unwrap(), 0);
            counted
        }));
    }
    drop(tx);
    let mut total = 0;
    for t in tasks {
        let n = t.await.unwrap();
        assert_eq!(n, ROUNDS, "one slot's count");
        total += n;
    }
    dev.join().unwrap();
    assert_eq!(total, 64 * ROUNDS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_counts_many_values_landing_at_once() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = Arc::new(c.acquire().unwrap());
    let (tx, dev) = device();
    let mut last = 0;
    for _ in 0..50 {
        last = s.arm().unwrap();
    }
    // One store of the last value completes all fifty.
    tx.send((s.clone(), last)).unwrap();
    let mut n = 0;
    while n < 50 {
        n += tokio::time::timeout(LONG, s.completions())
            .await
            .expect("counted")
            .unwrap();
    }
    assert_eq!(n, 50);
    drop(tx);
    dev.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_awaits_of_one_slot_each_wake_for_their_value() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = Arc::new(c.acquire().unwrap());
    let targets: Vec<u32> = (0..32).map(|_| s.arm().unwrap()).collect();
    let mut tasks = Vec::new();
    for &t in &targets {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::timeout(LONG, s.wait_async(t))
                .await
                .expect("landed")
                .unwrap();
            assert!(s.reached(t));
        }));
    }
    // The device completes them one by one, in order.
    let (tx, dev) = device();
    for &t in &targets {
        tx.send((s.clone(), t)).unwrap();
    }
    for t in tasks {
        t.await.unwrap();
    }
    drop(tx);
    dev.join().unwrap();
}

#[tokio::test]
async fn a_current_thread_runtime_awaits_too() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = Arc::new(c.acquire().unwrap());
    let t = s.arm().unwrap();
    // Not there yet: the timeout runs out, the slot is still usable.
    assert!(
        tokio::time::timeout(Duration::from_millis(30), s.wait_async(t))
            .await
            .is_err()
    );
    let (tx, dev) = device();
    tx.send((s.clone(), t)).unwrap();
    tokio::time::timeout(LONG, s.wait_async(t))
        .await
        .expect("landed")
        .unwrap();
    assert_eq!(
        tokio::time::timeout(LONG, s.completions())
            .await
            .expect("counted")
            .unwrap(),
        1
    );
    drop(tx);
    dev.join().unwrap();
}

#[tokio::test]
async fn awaiting_a_value_never_armed_is_einval() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let s = c.acquire().unwrap();
    let t = s.arm().unwrap();
    let e = s.wait_async(t.wrapping_add(3)).await.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL, "{}", e);
}
