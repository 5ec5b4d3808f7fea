// SPDX-License-Identifier: MIT
//! A group of thousands of slots, drained by drain_async while a plain
//! thread completes them: every slot named, every completion counted once.
#![cfg(feature = "tokio")]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cuflag::{Client, Slot};
use support::daemon::Daemon;

const SLOTS: usize = 4000;
const LONG: Duration = Duration::from_secs(30);
const DAEMON: &[&str] = &[
    "--slots-per-client",
    "4096",
    "--max-slots-per-uid",
    "100000",
];

/// Drain until every slot has been counted `want` times; no slot more.
async fn drain_all(g: &cuflag::Group, ids: &[u32], want: u64) {
    let mut counts: HashMap<u32, u64> = ids.iter().map(|&id| (id, 0)).collect();
    let mut left = ids.len();
    while left > 0 {
        let records = tokio::time::timeout(LONG, g.drain_async())
            .await
            .unwrap_or_else(|_| panic!("{} slots never drained", left))
            .unwrap();
        assert!(
            !records.is_empty(),
            "drain_async returns at least one record"
        );
        for (id, n) in records {
            let c = counts.get_mut(&id).expect("a slot of the group");
            let was = *c;
            *c += n;
            assert!(
                *c <= want,
                "slot {} counted {} times, armed {}",
                id,
                *c,
                want
            );
            if was < want && *c == want {
                left -= 1;
            }
        }
    }
    assert!(g.drain().unwrap().is_empty(), "nothing left over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_slots_drained_by_drain_async() {
    let d = Daemon::start(DAEMON);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let g = c.group().unwrap();
    let slots: Arc<Vec<Slot>> = Arc::new(g.acquire_many(SLOTS).unwrap());
    let ids: Vec<u32> = slots.iter().map(|s| s.id()).collect();

    // Round one: one value each; round two: three each, landing at once.
    for (round, per_slot) in [(0, 1u64), (1, 3u64)] {
        let targets: Vec<u32> = slots
            .iter()
            .map(|s| (0..per_slot).map(|_| s.arm().unwrap()).last().unwrap())
            .collect();
        let dev = {
            let slots = slots.clone();
            std::thread::spawn(move || {
                // From the far end, in bursts, as streams finishing would.
                for (i, s) in slots.iter().enumerate().rev() {
                    s.store(targets[i]);
                    if i % 256 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        };
        drain_all(&g, &ids, per_slot).await;
        dev.join().unwrap();
        assert!(
            slots.iter().all(|s| s.consume().unwrap() == 0),
            "round {}: counted twice",
            round
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_slot_awaits_and_counts_on_its_own() {
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let g = c.group().unwrap();
    let s = Arc::new(g.acquire().unwrap());
    let other = g.acquire().unwrap();
    let t = s.arm().unwrap();
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            tokio::time::timeout(LONG, s.wait_async(t))
                .await
                .expect("landed")
        })
    };
    let o = other.arm().unwrap();
    other.store(o);
    s.store(t);
    waiter.await.unwrap().unwrap();
    // The slot's own count takes its completion: the drain does not repeat it.
    assert_eq!(
        tokio::time::timeout(LONG, s.completions())
            .await
            .unwrap()
            .unwrap(),
        1
    );
    let mut rest = Vec::new();
    while !rest.iter().any(|&(id, _)| id == other.id()) {
        rest.extend(
            tokio::time::timeout(LONG, g.drain_async())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert!(rest.iter().all(|&(id, _)| id == other.id()), "{:?}", rest);
    assert_eq!(rest.iter().map(|&(_, n)| n).sum::<u64>(), 1);
}
