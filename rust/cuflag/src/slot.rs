// SPDX-License-Identifier: MIT
//! One completion timeline: [`Slot`].

use std::os::raw::{c_int, c_uint};
use std::os::unix::io::{FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Inner;
use crate::error::{check, Error, Result};
use crate::group::GroupInner;
use crate::{errno, sys};

/// Who keeps the library's slot valid: its client, or its group (which
/// keeps the client).
pub(crate) enum Owner {
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Client(Arc<Inner>),
    Group(Arc<GroupInner>),
}

/// A slot: a 32-bit flag in shared memory that only moves forward (a
/// timeline), and the eventfd cuflagd signals when it advances (the
/// group's, for a slot of a [`Group`](crate::Group)).
///
/// [`arm`](Slot::arm) reserves the next value; whoever completes the work
/// (a GPU stream through [`signal`](Slot::signal) with feature `cuda`, or
/// any writer through [`store`](Slot::store)) stores it into the flag; the
/// daemon sees the flag advance and counts a completion. Then
/// [`wait`](Slot::wait) (and `wait_async`) answer "has this value
/// landed", [`consume`](Slot::consume) (and `completions`) "how many
/// landed since I last asked" — each completion exactly once, across
/// daemon restarts too. Wait never takes counts away from consume.
///
/// `Slot` is `Send + Sync`: any thread may arm, store, wait and consume at
/// once. Dropping it gives it back to the daemon, which reuses it only
/// after every armed value has landed.
pub struct Slot {
    ptr: NonNull<sys::cuflag_slot>,
    id: u32,
    flag: NonNull<AtomicU32>,
    owner: Owner,
    /// Signalled from CUDA: its awaits let the library probe the stream.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) cuda: AtomicBool,
    /// The readiness of the slot's own eventfd in a tokio runtime, made at
    /// the first await (a group slot's awaits use the group's).
    #[cfg(feature = "tokio")]
    pub(crate) watch: crate::watch::Watch,
}

// The library allows every call on a slot from any thread, except
// cuflag_slot_release(), which only Drop makes; the flag is an aligned
// 32-bit word accessed atomically.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

impl Slot {
    /// Safety: `ptr` is a slot the library just handed out for `owner`.
    pub(crate) unsafe fn new(ptr: *mut sys::cuflag_slot, owner: Owner) -> Slot {
        let ptr = NonNull::new(ptr).expect("the library handed out a null slot");
        let id = sys::cuflag_slot_id(ptr.as_ptr()) as u32;
        let flag = NonNull::new(sys::cuflag_slot_flag(ptr.as_ptr()) as *mut AtomicU32)
            .expect("a slot without a flag");
        Slot {
            ptr,
            id,
            flag,
            owner,
            cuda: AtomicBool::new(false),
            #[cfg(feature = "tokio")]
            watch: crate::watch::Watch::new(),
        }
    }

    /// `n` slots from one all-or-nothing library call, each of `owner()`.
    pub(crate) fn many<A, O>(
        n: usize,
        call: &'static str,
        acquire: A,
        owner: O,
    ) -> Result<Vec<Slot>>
    where
        A: FnOnce(c_uint, *mut *mut sys::cuflag_slot) -> c_int,
        O: Fn() -> Owner,
    {
        if n == 0 || n > c_uint::MAX as usize {
            return Err(Error::new(errno::EINVAL, call));
        }
        let mut out = vec![std::ptr::null_mut(); n];
        check(acquire(n as c_uint, out.as_mut_ptr()), call)?;
        Ok(out
            .into_iter()
            .map(|p| unsafe { Slot::new(p, owner()) })
            .collect())
    }

    pub(crate) fn raw(&self) -> *mut sys::cuflag_slot {
        self.ptr.as_ptr()
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn client(&self) -> &Arc<Inner> {
        match &self.owner {
            Owner::Client(c) => c,
            Owner::Group(g) => &g.client,
        }
    }

    pub(crate) fn group(&self) -> Option<&Arc<GroupInner>> {
        match &self.owner {
            Owner::Client(_) => None,
            Owner::Group(g) => Some(g),
        }
    }

    /// The slot's index in its client's region; what [`Group::drain`]
    /// names.
    ///
    /// [`Group::drain`]: crate::Group::drain
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The slot's eventfd, to poll for readability (its counter is the
    /// completions not consumed yet). It stays the slot's: do not close
    /// it. A slot of a group has none: `EOPNOTSUPP` (poll the group's).
    pub fn fd(&self) -> Result<RawFd> {
        check(unsafe { sys::cuflag_slot_fd(self.raw()) }, "cuflag_slot_fd")
    }

    /// The flag's current value: the last value stored into it.
    pub fn flag(&self) -> u32 {
        unsafe { self.flag.as_ref() }.load(Ordering::Acquire)
    }

    /// Whether the flag has reached `target` (timeline order, wrap-around
    /// included), read straight from memory.
    pub fn reached(&self, target: u32) -> bool {
        self.flag().wrapping_sub(target) as i32 >= 0
    }

    /// Reserve the slot's next timeline value and arm it; returns the value
    /// to store when the work is done. No system call while the daemon's
    /// scanner is awake. While no daemon runs and the arm queue is full it
    /// blocks until one is back (up to the resume timeout): a task arming
    /// that fast through restarts calls it in `block_in_place`.
    /// Errors: `ENOTCONN` (the arm queue was full and no
    /// daemon came back within the resume timeout), `ESTALE`, `ECHILD`.
    pub fn arm(&self) -> Result<u32> {
        let mut target = 0u32;
        check(
            unsafe { sys::cuflag_slot_arm(self.raw(), &mut target) },
            "cuflag_slot_arm",
        )?;
        Ok(target)
    }

    /// Reserve the slot's next `n` values and arm them with one entry;
    /// returns the first (the last is `first + n - 1`, wrapping). A writer
    /// may store each, only the last, or run ahead: the daemon counts up to
    /// what was armed. Errors: `EINVAL` (`n` 0 or above 2^30), `EOVERFLOW`
    /// (2^31 values would be outstanding), or those of [`arm`](Slot::arm).
    pub fn arm_many(&self, n: u32) -> Result<u32> {
        let mut first = 0u32;
        check(
            unsafe { sys::cuflag_slot_arm_many(self.raw(), n as c_uint, &mut first) },
            "cuflag_slot_arm_many",
        )?;
        Ok(first)
    }

    /// [`store`](Slot::store), checked by the library: `EINVAL` when
    /// `value` was never reserved on this slot.
    pub fn complete(&self, value: u32) -> Result<()> {
        check(
            unsafe { sys::cuflag_slot_complete(self.raw(), value) },
            "cuflag_slot_complete",
        )?;
        Ok(())
    }

    /// Store `value` into the flag with release order, as a device does
    /// when its work is done: the completer of tests and of CPU work.
    pub fn store(&self, value: u32) {
        unsafe { self.flag.as_ref() }.store(value, Ordering::Release)
    }

    /// Block until the flag reaches `target` (from [`arm`](Slot::arm));
    /// `None` waits for ever. Returns at once, without a system call, when
    /// it is there already. Errors: `ETIMEDOUT`
    /// ([`Error::is_timeout`]), `EINVAL` (`target` was never armed here),
    /// `EIO` (a device fault stopped the work), `ECHILD`. It goes on across
    /// daemon restarts and leaves the counts to `consume`.
    pub fn wait(&self, target: u32, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|d| Instant::now() + d);
        loop {
            let ms = match deadline {
                None => -1,
                Some(end) => millis_until(end),
            };
            let rc = unsafe { sys::cuflag_slot_wait(self.raw(), target, ms) };
            // A timeout beyond what one call can take: call again.
            if rc == -errno::ETIMEDOUT && deadline.map_or(false, |end| Instant::now() < end) {
                continue;
            }
            check(rc, "cuflag_slot_wait")?;
            return Ok(());
        }
    }

    /// The completions signalled since the last consume: 0 when none. Each
    /// is counted exactly once, across daemon restarts (SIGKILL included),
    /// whichever of consume, `completions` or a group's drain takes it.
    /// Errors: `ECHILD`, or a read(2) errno of the eventfd.
    pub fn consume(&self) -> Result<u64> {
        let mut n = 0u64;
        let rc = unsafe { sys::cuflag_slot_consume(self.raw(), &mut n) };
        if rc == -errno::EAGAIN {
            return Ok(0);
        }
        check(rc, "cuflag_slot_consume")?;
        Ok(n)
    }

    /// An fd that names this slot, for another process to import
    /// ([`Client::import_slot`](crate::Client::import_slot)): pass it over
    /// a Unix socket (SCM_RIGHTS) or by fork. Whoever holds it may watch
    /// the slot's completions, whatever its uid; dropping it changes
    /// nothing for the slot. When the slot is dropped (or its client goes),
    /// every import of it ends with `EPIPE`. Errors: `EPERM` (an imported
    /// slot), `EMFILE`, `ENFILE`, `ENOTCONN`, `ECHILD`.
    pub fn export(&self) -> Result<OwnedFd> {
        let mut fd: c_int = -1;
        check(
            unsafe { sys::cuflag_slot_export(self.raw(), &mut fd) },
            "cuflag_slot_export",
        )?;
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The library's non-blocking check: Some(()) once `target` landed.
    #[cfg(feature = "tokio")]
    pub(crate) fn landed(&self, target: u32) -> Result<Option<()>> {
        match unsafe { sys::cuflag_slot_wait(self.raw(), target, 0) } {
            0 => Ok(Some(())),
            rc if rc == -errno::ETIMEDOUT => Ok(None),
            rc => Err(Error::new(-rc, "cuflag_slot_wait")),
        }
    }
}

/// Milliseconds left until `end`, rounded up, as one library call takes.
fn millis_until(end: Instant) -> c_int {
    let left = end.saturating_duration_since(Instant::now());
    let ms = (left.as_nanos() + 999_999) / 1_000_000;
    ms.min(c_int::MAX as u128) as c_int
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The eventfd's registration goes before the fd does: a number
        // closed first could be another file's by the time it is removed.
        #[cfg(feature = "tokio")]
        self.watch.close();
        match &self.owner {
            Owner::Client(_) => unsafe { sys::cuflag_slot_release(self.raw()) },
            // Not while a drain maps the group's records to slot ids.
            Owner::Group(g) => g.release(self.raw()),
        }
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("id", &self.id)
            .field("flag", &self.flag())
            .field("grouped", &self.group().is_some())
            .finish()
    }
}
