// SPDX-License-Identifier: MIT
//! Await GPU completions through cuflagd, the node's completion daemon.
//!
//! A [`Slot`] is a timeline: a 32-bit flag in memory shared with cuflagd,
//! which only moves forward, and an eventfd. [`Slot::arm`] reserves the
//! next value; whoever completes the work stores it into the flag — a GPU
//! stream after its kernels (`Slot::signal`, feature `cuda`), or any thread
//! ([`Slot::store`]); the daemon's one scanner for the whole node sees the
//! flag advance and signals the eventfd. A program then blocks
//! ([`Slot::wait`]), or awaits in tokio (`wait_async`, `completions`,
//! feature `tokio`, on by default) through `tokio::io::unix::AsyncFd`:
//! no thread per wait, no driver callback, one fd per slot or one per
//! [`Group`] of thousands.
//!
//! The crate translates libcuflag-client (through `cuflag-sys`); the
//! library keeps the state machines: restarts of the daemon are invisible
//! (the client resumes by itself, counts stay exact), a child of `fork`
//! gets `ECHILD` from what it inherited. Every failure is an [`Error`]
//! carrying the library's errno.
//!
//! ```no_run
//! # async fn demo() -> cuflag::Result<()> {
//! let client = cuflag::Client::connect(None)?; // $CUFLAG_SOCKET or /run/cuflagd
//! let slot = client.acquire()?;
//! let target = slot.arm()?;
//! // A GPU stream would store `target` after its work (slot.signal(stream));
//! // here a thread does.
//! std::thread::scope(|s| {
//!     s.spawn(|| slot.store(target));
//! });
//! slot.wait_async(target).await?;
//! assert_eq!(slot.consume()?, 1);
//! # Ok(())
//! # }
//! ```
//!
//! A future that a per-process reactor completed (cuda-async's
//! `DeviceFuture`: a flag write into the process's own pinned slab, watched
//! by its own scanner thread) becomes `slot.signal(stream)` and
//! `slot.wait_async(target)`: the same flag write, into memory cuflagd
//! shares, watched by the node's one scanner; the process keeps no scanner
//! thread and no slab (the crate's README maps the pieces one to one).
//!
//! Features: `tokio` (default) adds the futures; `cuda` adds
//! `Slot::signal(stream)`, `Client::synchronize(stream, timeout)` and
//! `Client::synchronize_async(stream)` on raw `CUstream` handles.

mod client;
#[cfg(feature = "cuda")]
mod cuda;
pub mod errno;
mod error;
mod group;
mod slot;
#[cfg(feature = "tokio")]
mod watch;

/// The raw declarations, for what this crate does not wrap.
pub use cuflag_sys as sys;

pub use client::{library_version, version, Client};
#[cfg(feature = "cuda")]
pub use cuda::CUstream;
pub use error::{Error, Result};
pub use group::Group;
pub use slot::Slot;
