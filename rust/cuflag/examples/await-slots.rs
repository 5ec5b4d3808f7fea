// SPDX-License-Identifier: MIT
//! Tasks of a tokio runtime await their slots while a plain thread, the
//! simulated device, completes them: what a GPU stream does with
//! `slot.signal(stream)` after its kernels.
//!
//!     cargo run --example await-slots [SOCKET]     # default: $CUFLAG_SOCKET
//!
//! Each task arms its slot, hands the value to the device thread and awaits
//! it; the device stores it into the flag; cuflagd signals the slot's
//! eventfd, which tokio's reactor watches.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

const TASKS: usize = 16;
const ROUNDS: usize = 1000;

#[tokio::main]
async fn main() -> cuflag::Result<()> {
    let socket = std::env::args().nth(1);
    // Display says which socket and what to do (the `?` of main would
    // print the error's Debug form).
    let client = match cuflag::Client::connect(socket.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("await-slots: {}", e);
            std::process::exit(1);
        }
    };
    let slots: Vec<Arc<cuflag::Slot>> = client
        .acquire_many(TASKS)?
        .into_iter()
        .map(Arc::new)
        .collect();

    // The device: stores each value it is handed, in order.
    let (tx, rx) = mpsc::channel::<(Arc<cuflag::Slot>, u32)>();
    let device = std::thread::spawn(move || {
        for (slot, target) in rx {
            slot.store(target);
        }
    });

    let start = Instant::now();
    let mut tasks = Vec::new();
    for slot in &slots {
        let slot = slot.clone();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut counted = 0;
            for _ in 0..ROUNDS {
                let target = slot.arm()?;
                tx.send((slot.clone(), target)).expect("the device runs");
                slot.wait_async(target).await?;
                counted += slot.consume()?;
            }
            // What landed after the last consume.
            while counted < ROUNDS as u64 {
                counted += slot.completions().await?;
            }
            Ok::<u64, cuflag::Error>(counted)
        }));
    }
    drop(tx);
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("task")?;
    }
    let secs = start.elapsed().as_secs_f64();
    device.join().expect("device thread");
    println!(
        "{} completions awaited by {} tasks in {:.3} s = {:.0}/s (every count exact)",
        total,
        TASKS,
        secs,
        total as f64 / secs
    );
    assert_eq!(total, (TASKS * ROUNDS) as u64);
    Ok(())
}
