// SPDX-License-Identifier: MIT
//! Feature `cuda` on a real GPU: tokio tasks await real streams through
//! cuflagd. Without a driver or a GPU each test says so and passes (skipped).
#![cfg(all(feature = "cuda", feature = "tokio"))]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuflag::Client;
use support::daemon::Daemon;
use support::driver::{Gpu, CUDA_SUCCESS};

const LONG: Duration = Duration::from_secs(30);

/// The GPU, or None after saying the test is skipped.
fn gpu(test: &str) -> Option<Arc<Gpu>> {
    let g = Gpu::open().map(Arc::new);
    match &g {
        Some(g) => eprintln!("{}: on {}", test, g.name),
        None => eprintln!("{}: skipped: no CUDA driver or no GPU", test),
    }
    g
}

/// A runtime whose threads all have the GPU's context current.
fn runtime(g: &Arc<Gpu>) -> tokio::runtime::Runtime {
    let g = g.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || g.make_current())
        .enable_all()
        .build()
        .unwrap()
}

/// The handle as a number, so that it may cross into a task.
fn handle(s: cuflag::CUstream) -> usize {
    s as usize
}

#[test]
fn a_signalled_stream_is_awaited_after_its_kernel() {
    let g = match gpu("signal") {
        Some(g) => g,
        None => return,
    };
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let rt = runtime(&g);
    let s = g.stream();
    let slot = c.acquire().unwrap();
    rt.block_on(async {
        for _ in 0..20 {
            let start = Instant::now();
            g.busy(s, 2_000_000); // 2 ms of GPU work
            let t = slot.signal(s).unwrap();
            tokio::time::timeout(LONG, slot.wait_async(t))
                .await
                .expect("landed")
                .unwrap();
            assert!(
                start.elapsed() >= Duration::from_millis(2),
                "woke before the kernel ended"
            );
            assert_eq!(g.query(s), CUDA_SUCCESS, "the stream's work is done");
            assert_eq!(
                tokio::time::timeout(LONG, slot.completions())
                    .await
                    .unwrap()
                    .unwrap(),
                1
            );
        }
    });
    assert_eq!(g.synchronize(s), CUDA_SUCCESS);
    drop(slot);
    g.destroy(s);
}

#[test]
fn sixty_four_tasks_synchronize_eight_streams() {
    let g = match gpu("synchronize_async") {
        Some(g) => g,
        None => return,
    };
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let rt = runtime(&g);
    let streams: Vec<usize> = (0..8).map(|_| handle(g.stream())).collect();
    // Eight tasks share each stream: each holds its stream while it launches,
    // awaits and queries, or another's later kernel would still be running
    // when it asks whether the stream's work is done.
    let turns: Vec<Arc<tokio::sync::Mutex<()>>> =
        (0..8).map(|_| Arc::new(tokio::sync::Mutex::new(()))).collect();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..64 {
            let (c, g, s) = (c.clone(), g.clone(), streams[i % 8]);
            let turn = turns[i % 8].clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..50 {
                    let _mine = turn.lock().await;
                    g.busy(s as cuflag::CUstream, 50_000);
                    // Made in a statement of its own: rustc 1.63 holds the
                    // cast's temporary (a raw pointer) across the await.
                    let synced = c.synchronize_async(s as cuflag::CUstream);
                    tokio::time::timeout(LONG, synced)
                        .await
                        .expect("synchronized")
                        .unwrap();
                    assert_eq!(g.query(s as cuflag::CUstream), CUDA_SUCCESS);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    // And blocking, from a plain thread.
    let s = streams[0] as cuflag::CUstream;
    g.busy(s, 1_000_000);
    c.synchronize(s, Some(LONG)).unwrap();
    assert_eq!(g.query(s), CUDA_SUCCESS);
    for s in streams {
        g.destroy(s as cuflag::CUstream);
    }
}

#[test]
fn the_device_pointer_needs_a_current_context() {
    let g = match gpu("device_pointer") {
        Some(g) => g,
        None => return,
    };
    let d = Daemon::start(&[]);
    let c = Client::connect(Some(&d.socket)).unwrap();
    let slot = c.acquire().unwrap();
    // This thread has the GPU's context current (Gpu::open).
    let p = slot.device_pointer().unwrap();
    assert_ne!(p, 0);
    assert_eq!(slot.device_ptr().unwrap(), p, "the earlier name says the same");
    // A thread of its own has none: EINVAL, as cuflag_cuda.h says.
    let e = std::thread::scope(|s| s.spawn(|| slot.device_pointer()).join().unwrap());
    assert_eq!(e.unwrap_err().errno(), cuflag::errno::EINVAL);
    drop(g);
}
