// SPDX-License-Identifier: MIT
//! cuflagd restarts (SIGTERM, SIGKILL, twice each) on the same socket while
//! tokio tasks arm, await and count slots and a group that a plain thread
//! completes, with no restart code in the program: the awaits resume the
//! client themselves, and every completion is counted exactly once.
#![cfg(feature = "tokio")]

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cuflag::{Client, Slot};
use support::daemon::Daemon;

const SLOTS: usize = 16;
const GROUPED: usize = 16;
const LONG: Duration = Duration::from_secs(30);
/// How long the program runs between restarts, and how long no daemon runs.
const RUN: Duration = Duration::from_millis(300);
const AWAY: Duration = Duration::from_millis(100);

struct Load {
    stop: AtomicBool,
    /// Values awaited so far, of every slot: the load's progress.
    landed: AtomicU64,
    armed: AtomicU64,
    counted: AtomicU64,
    grouped_armed: AtomicU64,
    grouped_counted: AtomicU64,
    arming_done: AtomicBool,
}

/// Arm, have the device complete, await; with `count`, take the counts too.
async fn run_slot(s: Arc<Slot>, dev: mpsc::Sender<(Arc<Slot>, u32)>, load: Arc<Load>, count: bool) {
    let (mut armed, mut counted) = (0u64, 0u64);
    while !load.stop.load(Ordering::Relaxed) {
        let t = s.arm().unwrap();
        armed += 1;
        dev.send((s.clone(), t)).unwrap();
        if tokio::time::timeout(LONG, s.wait_async(t)).await.is_err() {
            panic!(
                "slot {} never saw {} land (flag {}, {} counted)",
                s.id(),
                t,
                s.flag(),
                counted
            );
        }
        load.landed.fetch_add(1, Ordering::Relaxed);
        if count {
            counted += s.consume().unwrap();
        }
        tokio::task::yield_now().await;
    }
    if count {
        while counted < armed {
            counted += tokio::time::timeout(LONG, s.completions())
                .await
                .expect("counted")
                .unwrap();
        }
        assert_eq!(counted, armed, "slot {}", s.id());
        load.counted.fetch_add(counted, Ordering::Relaxed);
        load.armed.fetch_add(armed, Ordering::Relaxed);
    } else {
        load.grouped_armed.fetch_add(armed, Ordering::Relaxed);
    }
}

/// A daemon, a client of it, and a runtime of two workers.
fn setup() -> (Daemon, Client, tokio::runtime::Runtime) {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    (d, c, rt)
}

#[test]
fn restarts_under_load_count_every_completion_once() {
    restarts_under_load(0);
}

/// The same with a group's slots besides, drained by drain_async while
/// their own tasks await them: the drain reads the group's eventfd on
/// another thread, and each grouped await must still hear of every signal
/// (tests/doorbell.rs shows the shape alone); and the library adopts a
/// group's slots after the others, so a resume attempt given up between
/// the two must leave the arms queued for the group's slots to the next.
#[test]
fn restarts_under_load_count_every_grouped_completion_once() {
    restarts_under_load(GROUPED);
}

fn restarts_under_load(grouped: usize) {
    let (mut d, c, rt) = setup();
    let load = Arc::new(Load {
        stop: AtomicBool::new(false),
        landed: AtomicU64::new(0),
        armed: AtomicU64::new(0),
        counted: AtomicU64::new(0),
        grouped_armed: AtomicU64::new(0),
        grouped_counted: AtomicU64::new(0),
        arming_done: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel::<(Arc<Slot>, u32)>();
    let device = std::thread::spawn(move || {
        for (s, t) in rx {
            s.store(t);
        }
    });

    let group = Arc::new(c.group().unwrap());
    let mut tasks = Vec::new();
    for s in c.acquire_many(SLOTS).unwrap() {
        tasks.push(rt.spawn(run_slot(Arc::new(s), tx.clone(), load.clone(), true)));
    }
    let grouped_slots: Vec<Arc<Slot>> = group
        .acquire_many(grouped.max(1))
        .unwrap()
        .into_iter()
        .take(grouped)
        .map(Arc::new)
        .collect();
    for s in &grouped_slots {
        tasks.push(rt.spawn(run_slot(s.clone(), tx.clone(), load.clone(), false)));
    }
    drop(tx);
    let drainer = {
        let (g, load) = (group.clone(), load.clone());
        rt.spawn(async move {
            loop {
                if load.arming_done.load(Ordering::Acquire)
                    && load.grouped_counted.load(Ordering::Relaxed)
                        == load.grouped_armed.load(Ordering::Relaxed)
                {
                    return;
                }
                // Bounded, so that the end of the arming is seen.
                if let Ok(r) =
                    tokio::time::timeout(Duration::from_millis(50), g.drain_async()).await
                {
                    let n: u64 = r.unwrap().iter().map(|&(_, n)| n).sum();
                    load.grouped_counted.fetch_add(n, Ordering::Relaxed);
                }
            }
        })
    };

    let progress = || load.landed.load(Ordering::Relaxed);
    let mut epochs = vec![c.epoch()];
    for kill in [false, true, false, true] {
        std::thread::sleep(RUN);
        let before = progress();
        assert!(before > 0, "the load runs");
        d.bounce(kill, AWAY);
        // The program goes on by itself: the client is served by the new
        // daemon, whose signals count.
        let deadline = Instant::now() + LONG;
        while c.epoch() == *epochs.last().unwrap() || progress() <= before {
            assert!(
                Instant::now() < deadline,
                "no progress after the restart: gone {}, epoch {:x}, drained {}",
                c.daemon_gone(),
                c.epoch(),
                progress()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        epochs.push(c.epoch());
    }
    std::thread::sleep(RUN);
    load.stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
        load.arming_done.store(true, Ordering::Release);
        if tokio::time::timeout(LONG, drainer).await.is_err() {
            let left: Vec<(u32, u32, u64)> = grouped_slots
                .iter()
                .map(|s| (s.id(), s.flag(), s.consume().unwrap()))
                .collect();
            panic!(
                "the group did not drain: {} of {} counted; (id, flag, consume) {:?}",
                load.grouped_counted.load(Ordering::Relaxed),
                load.grouped_armed.load(Ordering::Relaxed),
                left
            );
        }
    });
    device.join().unwrap();
    let (armed, counted) = (
        load.armed.load(Ordering::Relaxed),
        load.counted.load(Ordering::Relaxed),
    );
    let (garmed, gcounted) = (
        load.grouped_armed.load(Ordering::Relaxed),
        load.grouped_counted.load(Ordering::Relaxed),
    );
    eprintln!(
        "slots: {} armed, {} counted; grouped: {} armed, {} drained; epochs {:x?}",
        armed, counted, garmed, gcounted, epochs
    );
    assert_eq!(counted, armed);
    assert_eq!(gcounted, garmed);
    assert!(armed > 0 && (grouped == 0 || garmed > 0));
    epochs.dedup();
    assert_eq!(epochs.len(), 5, "every restart seen");
}

#[test]
fn an_await_alone_resumes_the_client() {
    let (mut d, c, rt) = setup();
    let s = Arc::new(c.acquire().unwrap());
    for kill in [true, false] {
        let t = s.arm().unwrap();
        let waiter = {
            let s = s.clone();
            rt.spawn(async move { s.wait_async(t).await })
        };
        let counter = {
            let s = s.clone();
            rt.spawn(async move { s.completions().await })
        };
        let epoch = c.epoch();
        d.bounce(kill, AWAY);
        // Nothing but the two awaits can have resumed the client.
        let deadline = Instant::now() + LONG;
        while c.epoch() == epoch {
            assert!(
                Instant::now() < deadline,
                "the awaits did not resume the client"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!waiter.is_finished() && !counter.is_finished());
        // Signalled by the new daemon.
        s.store(t);
        rt.block_on(async {
            tokio::time::timeout(LONG, waiter)
                .await
                .expect("landed")
                .unwrap()
                .unwrap();
            let n = tokio::time::timeout(LONG, counter)
                .await
                .expect("counted")
                .unwrap()
                .unwrap();
            assert_eq!(n, 1);
        });
    }
}
