// SPDX-License-Identifier: MIT
//! Feature `cuda`: streams complete slots (`cuflag_cuda.h`). The handles are
//! the Driver API's raw `CUstream`, so that any CUDA crate can pass its own
//! (cudarc's `CudaStream::cu_stream()`, cuda-async's stream, a pointer from
//! C). Nothing here links CUDA: the library loads libcuda.so.1 at first use.

use std::collections::HashMap;
#[cfg(feature = "tokio")]
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::slot::Slot;
use crate::{errno, sys, Client};

pub use sys::CUstream;

/// The slot that synchronizes each stream a client has seen (by handle).
#[derive(Default)]
pub(crate) struct Streams {
    slots: Mutex<HashMap<usize, Arc<Slot>>>,
}

impl Slot {
    /// Complete the slot's next value after the work queued so far on
    /// `stream` (`cuStreamWriteValue32` of the value into the flag, or a
    /// host function where the driver refuses that), arm it, and return
    /// the value: await it with `wait_async`, or [`wait`](Slot::wait).
    ///
    /// On a stream under graph capture the graph records a node that
    /// advances the flag at each launch and nothing is armed: the call
    /// returns 0, and [`launched`](Slot::launched) arms after each launch.
    /// Errors: `ENODEV` (no driver, or no context for the stream),
    /// `ENOSYS` (a library built without CUDA), `EIO` (the driver refused
    /// the store, or the context faulted), `ECHILD`, or an error of
    /// [`arm`](Slot::arm).
    // The handle goes to the driver, which checks it (as every CUDA crate's
    // safe stream calls do): a stream of this process, or null.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn signal(&self, stream: CUstream) -> Result<u32> {
        let mut target = 0u32;
        self.cuda.store(true, Ordering::Relaxed);
        check(
            unsafe { sys::cuflag_cuda_signal(self.raw(), stream, &mut target) },
            "cuflag_cuda_signal",
        )?;
        Ok(target)
    }

    /// After a launch, on `stream`, of a graph into which
    /// [`signal`](Slot::signal) was captured: arm the value that launch
    /// completes, once per launch in launch order. Errors as `signal`.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn launched(&self, stream: CUstream) -> Result<u32> {
        let mut target = 0u32;
        self.cuda.store(true, Ordering::Relaxed);
        check(
            unsafe { sys::cuflag_cuda_launched(self.raw(), stream, &mut target) },
            "cuflag_cuda_launched",
        )?;
        Ok(target)
    }

    /// The flag's device address, for a kernel that completes the slot
    /// itself (`cuflag_device_signal()` of `cuflag/cuflag_device.h`, after
    /// [`arm`](Slot::arm) or [`arm_many`](Slot::arm_many)); registers the
    /// client's pages in the current context on first use. Errors:
    /// `EINVAL` (no context is current in this thread: make one current
    /// first, e.g. `cuDevicePrimaryCtxRetain` + `cuCtxSetCurrent`),
    /// `ENODEV` (no driver, `cuInit` not called, or the pages cannot be
    /// mapped for this device), `ENOSYS`, `ENOMEM`, `ECHILD`.
    pub fn device_pointer(&self) -> Result<u64> {
        let mut p: sys::CUdeviceptr = 0;
        check(
            unsafe { sys::cuflag_cuda_slot_devptr(self.raw(), &mut p) },
            "cuflag_cuda_slot_devptr",
        )?;
        self.cuda.store(true, Ordering::Relaxed);
        Ok(p)
    }

    /// [`device_pointer`](Slot::device_pointer), by its earlier name.
    pub fn device_ptr(&self) -> Result<u64> {
        self.device_pointer()
    }

    /// Whether a device fault stopped the work of the slot's last stream
    /// (`EIO`: the flag will not advance). Waits check this themselves.
    pub fn check_fault(&self) -> Result<()> {
        check(
            unsafe { sys::cuflag_cuda_check(self.raw()) },
            "cuflag_cuda_check",
        )?;
        Ok(())
    }
}

impl Client {
    /// The stream's slot, signalled after its queued work: (slot, value).
    fn signal_stream(&self, stream: CUstream) -> Result<(Arc<Slot>, u32)> {
        // A capture would record the signal into the graph, to run at the
        // graph's launches, not after the work queued now.
        if check(
            unsafe { sys::cuflag_cuda_capturing(stream) },
            "cuflag_cuda_capturing",
        )? == 1
        {
            return Err(Error::new(
                errno::EINVAL,
                "synchronize: the stream is being captured",
            ));
        }
        let slot = {
            let mut slots = self.streams.slots.lock().unwrap_or_else(|e| e.into_inner());
            match slots.get(&(stream as usize)) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(self.acquire()?);
                    slots.insert(stream as usize, s.clone());
                    s
                }
            }
        };
        let target = slot.signal(stream)?;
        Ok((slot, target))
    }

    /// Block until everything queued on `stream` before the call has
    /// finished, as `cuStreamSynchronize` does, without a thread in the
    /// driver. The client keeps one slot per stream it has seen, for as
    /// long as it lives. Errors: `EINVAL` (the stream is being captured),
    /// `ETIMEDOUT`, `EIO` (a device fault), `ENODEV`, or those of
    /// [`acquire`](Client::acquire) and [`Slot::signal`].
    pub fn synchronize(&self, stream: CUstream, timeout: Option<Duration>) -> Result<()> {
        let (slot, target) = self.signal_stream(stream)?;
        slot.wait(target, timeout)
    }

    /// [`synchronize`](Client::synchronize) for the running tokio runtime:
    /// completes once everything queued on `stream` before the call has
    /// finished. Any number of tasks may await one stream; each wakes when
    /// its own work is done. The future is `Send` (the handle is taken
    /// before it is made). Bound it with `tokio::time::timeout`.
    #[cfg(feature = "tokio")]
    pub fn synchronize_async(
        &self,
        stream: CUstream,
    ) -> impl Future<Output = Result<()>> + Send + '_ {
        let signalled = self.signal_stream(stream);
        async move {
            let (slot, target) = signalled?;
            slot.wait_async(target).await
        }
    }
}
