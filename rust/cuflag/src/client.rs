// SPDX-License-Identifier: MIT
//! The connection to cuflagd: [`Client`].

use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_short, c_ulong};
use std::os::unix::io::{AsFd, AsRawFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::group::Group;
use crate::slot::{Owner, Slot};
use crate::{errno, sys};

/// What outlives every handle of a client: the library's client, which
/// the last of the `Client` clones, slots and groups to go disconnects.
pub(crate) struct Inner {
    pub(crate) ptr: NonNull<sys::cuflag_client>,
    /// The library's dispatcher fd, registered with the runtime at the
    /// first await (the library's resumes and looks while no daemon runs).
    #[cfg(feature = "tokio")]
    pub(crate) dispatch: crate::watch::Watch,
}

// libcuflag-client lets any thread call any function on one client at once,
// except cuflag_disconnect(), which runs here only when nothing else holds
// the client (the last Arc).
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // Out of the reactor before the library closes the fd.
        #[cfg(feature = "tokio")]
        self.dispatch.close();
        unsafe { sys::cuflag_disconnect(self.ptr.as_ptr()) }
    }
}

impl Inner {
    pub(crate) fn raw(&self) -> *mut sys::cuflag_client {
        self.ptr.as_ptr()
    }

    pub(crate) fn daemon_gone(&self) -> bool {
        hung_up(unsafe { sys::cuflag_client_fd(self.raw()) })
    }
}

/// A connection to cuflagd and the shared-memory region it hands this
/// process: the source of [`Slot`]s and [`Group`]s.
///
/// `Client` is a cheap handle (`Clone` shares the one connection) and may
/// be used from any thread. The connection stays open while any clone, slot
/// or group of it lives; the last of them to go releases what the daemon
/// holds for it.
///
/// When cuflagd restarts, the client resumes by itself with the daemon that
/// listens next on the same socket, as libcuflag-client(3) describes: slots
/// keep their ids, flags and eventfds, arms made meanwhile wait in the
/// region's queue, and every completion is counted exactly once. In a child
/// of `fork(2)` the inherited client answers `ECHILD`; connect anew there.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    #[cfg(feature = "cuda")]
    pub(crate) streams: Arc<crate::cuda::Streams>,
}

impl Client {
    /// Connect to cuflagd at `path`; `None` is the library's default:
    /// `$CUFLAG_SOCKET`, else `/run/cuflagd/cuflagd.sock`.
    ///
    /// Errors (the errno of `cuflag_connect()`): `ENOENT` or
    /// `ECONNREFUSED` (no daemon there), `EACCES` (not in group cuflag),
    /// `ENAMETOOLONG`, `EUSERS` (the daemon's client limits), `EBUSY` (this
    /// user is cooling down), `ETIMEDOUT`, `EPROTO`, `ENOMEM`; `EINVAL` for
    /// a path with a NUL byte in it.
    pub fn connect(path: Option<&str>) -> Result<Client> {
        let named = path;
        let path = match path {
            Some(p) => {
                Some(CString::new(p).map_err(|_| Error::connect_failed(errno::EINVAL, named))?)
            }
            None => None,
        };
        let mut out = ptr::null_mut();
        let rc = unsafe {
            sys::cuflag_connect(path.as_ref().map_or(ptr::null(), |p| p.as_ptr()), &mut out)
        };
        if rc < 0 {
            return Err(Error::connect_failed(-rc, named));
        }
        let ptr = NonNull::new(out).expect("cuflag_connect succeeded without a client");
        Ok(Client::from_inner(Arc::new(Inner {
            ptr,
            #[cfg(feature = "tokio")]
            dispatch: crate::watch::Watch::new_readable(),
        })))
    }

    fn from_inner(inner: Arc<Inner>) -> Client {
        Client {
            inner,
            #[cfg(feature = "cuda")]
            streams: Arc::new(crate::cuda::Streams::default()),
        }
    }

    /// One slot with an eventfd of its own.
    ///
    /// Errors: `ENOSPC` (the daemon's slots-per-client limit), `EDQUOT`
    /// (this user's slot limit), `EBUSY` (the request-rate limit), `EMFILE`,
    /// `ENOTCONN` (the daemon went away and none came back within the
    /// resume timeout), `ESTALE`, `ETIMEDOUT`, `ECHILD`.
    pub fn acquire(&self) -> Result<Slot> {
        let mut out = ptr::null_mut();
        check(
            unsafe { sys::cuflag_slot_acquire(self.inner.raw(), &mut out) },
            "cuflag_slot_acquire",
        )?;
        Ok(unsafe { Slot::new(out, Owner::Client(self.inner.clone())) })
    }

    /// `n` slots in as few round trips as possible; all or nothing. Errors
    /// as [`acquire`](Client::acquire), and `EINVAL` when `n` is 0.
    pub fn acquire_many(&self, n: usize) -> Result<Vec<Slot>> {
        let c = self.inner.raw();
        Slot::many(
            n,
            "cuflag_slots_acquire",
            |k, out| unsafe { sys::cuflag_slots_acquire(c, k, out) },
            || Owner::Client(self.inner.clone()),
        )
    }

    /// A slot that watches the one `fd` names (from [`Slot::export`], in
    /// this or another process): its eventfd rings and its count advances
    /// with the exporter's completions, counted from now, exactly once
    /// (across daemon restarts too); `wait` takes the exporter's values.
    /// It cannot be armed, stored or exported (`EPERM`); when the exporter's
    /// slot goes, `wait` and `consume` fail with `EPIPE`. It counts against
    /// this client's quotas. `fd` stays the caller's. Errors: `EINVAL` (not
    /// a live handle of this daemon's), `EBADF`, or an error of
    /// [`acquire`](Client::acquire).
    pub fn import_slot(&self, fd: impl AsFd) -> Result<Slot> {
        let mut out = ptr::null_mut();
        check(
            unsafe {
                sys::cuflag_slot_import(self.inner.raw(), fd.as_fd().as_raw_fd(), &mut out)
            },
            "cuflag_slot_import",
        )?;
        Ok(unsafe { Slot::new(out, Owner::Client(self.inner.clone())) })
    }

    /// A new [`Group`]: slots that share one eventfd and one completion
    /// ring. Errors: `ENOSPC` (the daemon's --groups-per-client), `EMFILE`,
    /// or an error of [`acquire`](Client::acquire).
    pub fn group(&self) -> Result<Group> {
        Group::create(&self.inner)
    }

    /// The daemon's epoch: it changes at every daemon start.
    pub fn epoch(&self) -> u64 {
        unsafe { sys::cuflag_client_epoch(self.inner.raw()) }
    }

    /// The connection's fd, to learn that the daemon went away (POLLRDHUP).
    /// Never read, write or close it; after a resume the same number is a
    /// new connection (register it again). The futures of this crate watch
    /// it themselves.
    pub fn fd(&self) -> RawFd {
        unsafe { sys::cuflag_client_fd(self.inner.raw()) }
    }

    /// Whether the daemon behind the connection has hung up and no resume
    /// was made since (a poll that reads nothing).
    pub fn daemon_gone(&self) -> bool {
        self.inner.daemon_gone()
    }

    /// Resume with the daemon listening now, instead of at the next call
    /// that needs it. Errors: `ECONNREFUSED`/`ENOENT` (none listens yet),
    /// `EBUSY` (the daemon still serves this client), `ESTALE` (another
    /// region layout), `EOPNOTSUPP` (a --slab cuda-ipc daemon), `EUSERS`,
    /// `ETIMEDOUT`, `EPROTO`, `ECHILD`.
    pub fn reconnect(&self) -> Result<()> {
        check(
            unsafe { sys::cuflag_reconnect(self.inner.raw()) },
            "cuflag_reconnect",
        )?;
        Ok(())
    }

    /// How long a call that finds the daemon gone waits for one to come
    /// back (default 30 s; `None`: for ever). Waits are not bounded by it.
    pub fn set_resume_timeout(&self, timeout: Option<Duration>) -> Result<()> {
        let ms = match timeout {
            None => -1,
            Some(d) => d.as_millis().min(c_int::MAX as u128) as c_int,
        };
        check(
            unsafe { sys::cuflag_client_set_resume_timeout(self.inner.raw(), ms) },
            "cuflag_client_set_resume_timeout",
        )?;
        Ok(())
    }
}

/// The loaded library's version, "MAJOR.MINOR.PATCH" (the Python
/// package's `cuflag.library_version()`).
pub fn library_version() -> &'static str {
    unsafe { CStr::from_ptr(sys::cuflag_version()) }
        .to_str()
        .unwrap_or("?")
}

/// [`library_version`], by its earlier name.
pub fn version() -> &'static str {
    library_version()
}

#[repr(C)]
struct PollFd {
    fd: c_int,
    events: c_short,
    revents: c_short,
}

extern "C" {
    fn poll(fds: *mut PollFd, nfds: c_ulong, timeout: c_int) -> c_int;
}

const POLLERR: c_short = 0x8;
const POLLHUP: c_short = 0x10;
const POLLRDHUP: c_short = 0x2000;

/// Whether the peer of the connection `fd` has hung up; never reads it.
fn hung_up(fd: RawFd) -> bool {
    let mut p = PollFd {
        fd,
        events: POLLRDHUP,
        revents: 0,
    };
    let n = unsafe { poll(&mut p, 1, 0) };
    n > 0 && p.revents & (POLLRDHUP | POLLHUP | POLLERR) != 0
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("epoch", &format_args!("{:#x}", self.epoch()))
            .finish()
    }
}
