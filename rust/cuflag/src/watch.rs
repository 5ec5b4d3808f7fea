// SPDX-License-Identifier: MIT
//! Awaiting slots and groups in tokio: an eventfd's readiness through
//! `AsyncFd`, and the library's dispatch call for everything else.
//!
//! An eventfd is the doorbell of its slot (or group), and consumes and
//! drains read its counter, maybe on another thread than the await: so an
//! await waits for the fd's *writable* readiness, which epoll reports at
//! every signal whatever the counter holds by then (see `Watch::new`).
//!
//! The readiness follows `AsyncFd`'s documentation: the condition (a flag
//! reached, a count taken) is checked, and readiness cleared only after a
//! check found nothing. tokio clears only the readiness that the guard saw,
//! so a signal that comes after the check is never lost; and an await woken
//! by a readiness that another await cleared meanwhile still gets its turn
//! to check. Several awaits of one slot share one registration.
//!
//! What the daemon's absence needs (noticing the hang-up, resuming, looking
//! at the flags and ringing the eventfds of slots that moved meanwhile,
//! probing CUDA streams for a device fault) is the library's: every await
//! also watches the fd of `cuflag_client_dispatch_fd()` and sleeps for the
//! timeout of `cuflag_client_dispatch_timeout()`, and calls
//! `cuflag_client_dispatch()` when either says so (libwayland's
//! prepare_read / dispatch is the model). While a daemon serves and no CUDA
//! work is awaited, that costs nothing: no timer, no system call.

use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::client::Inner;
use crate::error::{check, Error, Result};
use crate::slot::Slot;
use crate::{errno, sys};

/// An await on a slot signalled from CUDA lets the library look at its
/// stream this soon at the latest (the library then names its own probe
/// timeouts): a device fault stops the flag, and only a probe sees it.
const CUDA_FIRST_DISPATCH: Duration = Duration::from_millis(100);

/// An fd the library owns, as `AsyncFd` takes it: never closed here.
struct Borrowed(RawFd);

impl AsRawFd for Borrowed {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

type Registration = Arc<AsyncFd<Borrowed>>;

/// The registration of one of the library's fds with a runtime's reactor,
/// made at the first await and shared by every await after it.
pub(crate) struct Watch {
    reg: Mutex<Option<Registration>>,
    /// Both for the eventfds (see `Watch::new`), READABLE for the
    /// dispatcher's epoll.
    interest: Interest,
}

impl Watch {
    /// The watch of a slot's or a group's eventfd. It waits for the fd to
    /// turn *writable*, which an eventfd always is, epoll being asked for
    /// both (the daemon's write wakes epoll for readers only): epoll looks
    /// at the fd again when it hands an edge to the reactor, and a consume
    /// or drain that read the counter back to 0 in between (on another
    /// thread) would leave a readable edge with nothing to report, so the
    /// reactor would never hear of that signal; the writable one is
    /// reported at every write. (The library's own waits ask epoll for
    /// EPOLLIN and EPOLLOUT for the same reason.)
    pub(crate) fn new() -> Watch {
        Watch::with(Interest::READABLE.add(Interest::WRITABLE))
    }

    /// The watch of the dispatcher's fd (an epoll: readable when it has
    /// something to say).
    pub(crate) fn new_readable() -> Watch {
        Watch::with(Interest::READABLE)
    }

    fn with(interest: Interest) -> Watch {
        Watch {
            interest,
            reg: Mutex::new(None),
        }
    }

    /// The registration; `fd()` names the fd at the first call.
    fn get(&self, fd: impl FnOnce() -> Result<RawFd>) -> Result<Registration> {
        let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = reg.as_ref() {
            return Ok(r.clone());
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::new(errno::EINVAL, "await outside a tokio runtime"));
        }
        let r = AsyncFd::with_interest(Borrowed(fd()?), self.interest)
            .map(Arc::new)
            .map_err(|e| Error::new(e.raw_os_error().unwrap_or(errno::EIO), "AsyncFd::new"))?;
        *reg = Some(r.clone());
        Ok(r)
    }

    /// Forget `old`, whose runtime has shut down: the next await registers
    /// with its own.
    fn reset(&self, old: &Registration) {
        let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        if reg.as_ref().map_or(false, |r| Arc::ptr_eq(r, old)) {
            *reg = None;
        }
    }

    /// Deregister before the library closes the fd (awaits hold a borrow of
    /// the owner, so none is in progress).
    pub(crate) fn close(&self) {
        self.reg.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// What an await waits for.
pub(crate) enum Until<'a> {
    /// A value landing on a slot: the flag says, with or without a daemon.
    Landed(&'a Slot),
    /// A count to hand out (of a slot, or of a group): it ends with the
    /// dispatcher's error once no daemon will come back (ENOTCONN past the
    /// resume timeout, ESTALE, EPROTONOSUPPORT, EOPNOTSUPP).
    Count(Option<&'a Slot>),
}

/// One step of the library's dispatcher; its error when no daemon serves
/// and none will (a resume under way is not an error).
fn dispatch(client: &Inner) -> Result<()> {
    match unsafe { sys::cuflag_client_dispatch(client.raw()) } {
        0 => Ok(()),
        rc if rc == -errno::EAGAIN => Ok(()),
        rc => Err(Error::new(-rc, "cuflag_client_dispatch")),
    }
}

/// The dispatcher's fd, registered (made by the library on first need).
fn dispatch_registration(client: &Inner) -> Result<Registration> {
    client.dispatch.get(|| {
        check(
            unsafe { sys::cuflag_client_dispatch_fd(client.raw()) },
            "cuflag_client_dispatch_fd",
        )
    })
}

/// How long to wait before the next dispatch (None: only at the fd's
/// readiness).
fn dispatch_timeout(client: &Inner, cuda: bool) -> Result<Option<Duration>> {
    let mut ms = -1;
    check(
        unsafe { sys::cuflag_client_dispatch_timeout(client.raw(), &mut ms) },
        "cuflag_client_dispatch_timeout",
    )?;
    Ok(match ms {
        ms if ms >= 0 => Some(Duration::from_millis(ms as u64)),
        _ if cuda => Some(CUDA_FIRST_DISPATCH),
        _ => None,
    })
}

/// Await `check()` returning Some, watching `watch`'s eventfd (`fd()`).
pub(crate) async fn until<T, F>(
    client: &Inner,
    watch: &Watch,
    fd: impl Fn() -> Result<RawFd>,
    what: Until<'_>,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Result<Option<T>>,
{
    let (counts, slot) = match what {
        Until::Landed(s) => (false, Some(s)),
        Until::Count(s) => (true, s),
    };
    // Made before the first check: once it exists, a consume or drain
    // that finds the daemon gone never waits for a resume attempt.
    let mut disp = dispatch_registration(client)?;
    // Whether to check before waiting: not right after a check that
    // cleared the readiness (the next readiness is checked anyway).
    let mut look = true;
    loop {
        if look {
            if let Some(v) = check()? {
                return Ok(v);
            }
        }
        look = true;
        let own = watch.get(&fd)?;
        let cuda = slot.map_or(false, |s| s.cuda.load(Ordering::Relaxed));
        let sleep = dispatch_timeout(client, cuda)?;
        tokio::select! {
            r = own.writable() => match r {
                Ok(mut guard) => {
                    if let Some(v) = check()? {
                        return Ok(v);
                    }
                    guard.clear_ready();
                    look = false;
                }
                // Its runtime has shut down: register again in ours.
                Err(_) => watch.reset(&own),
            },
            r = disp.readable() => match r {
                Ok(mut guard) => {
                    let stepped = dispatch(client);
                    guard.clear_ready();
                    if counts {
                        stepped?;
                    }
                }
                Err(_) => {
                    client.dispatch.reset(&disp);
                    disp = dispatch_registration(client)?;
                }
            },
            _ = tokio::time::sleep(sleep.unwrap_or_default()), if sleep.is_some() => {
                let stepped = dispatch(client);
                if counts {
                    stepped?;
                }
            }
        }
    }
}

impl Slot {
    /// The watch that signals this slot and its fd: its own, or its group's.
    fn signalled_by(&self) -> (&Watch, impl Fn() -> Result<RawFd> + '_) {
        let g = self.group();
        let watch = match g {
            Some(g) => &g.watch,
            None => &self.watch,
        };
        (watch, move || match g {
            Some(g) => Ok(g.fd()),
            None => self.fd(),
        })
    }

    /// Wait in the running tokio runtime until the flag reaches `target`;
    /// errors as [`wait`](Slot::wait) (bound it with
    /// `tokio::time::timeout`). Checks the flag first: no system call and
    /// no registration when the value has landed. It goes on across daemon
    /// restarts (the library looks at the flags while no daemon signals)
    /// and leaves the counts to `consume`. The future is `Send`.
    pub async fn wait_async(&self, target: u32) -> Result<()> {
        let (watch, fd) = self.signalled_by();
        until(self.client(), watch, fd, Until::Landed(self), || {
            self.landed(target)
        })
        .await
    }

    /// Wait in the running tokio runtime for at least one completion and
    /// return how many landed since the last count (as
    /// [`consume`](Slot::consume), never 0). It goes on across daemon
    /// restarts; `ENOTCONN` if none comes back within the client's resume
    /// timeout, `ESTALE`/`EOPNOTSUPP`/`EPROTONOSUPPORT` if the one that
    /// came back cannot take the client (nothing is lost: a later count
    /// takes what lands).
    pub async fn completions(&self) -> Result<u64> {
        let (watch, fd) = self.signalled_by();
        until(self.client(), watch, fd, Until::Count(Some(self)), || {
            self.consume().map(|n| if n > 0 { Some(n) } else { None })
        })
        .await
    }
}

impl crate::Group {
    /// Wait in the running tokio runtime for at least one record, and
    /// return what [`drain`](crate::Group::drain) returns then (never
    /// empty). Across daemon restarts as [`Slot::completions`].
    pub async fn drain_async(&self) -> Result<Vec<(u32, u64)>> {
        let g = self.inner();
        until(
            &g.client,
            &g.watch,
            || Ok(g.fd()),
            Until::Count(None),
            || g.drain().map(|v| if v.is_empty() { None } else { Some(v) }),
        )
        .await
    }
}
