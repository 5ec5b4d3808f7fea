// SPDX-License-Identifier: MIT
//! Awaiting slots and groups in tokio: an eventfd's readiness through
//! `AsyncFd`, and what carries an await across a daemon restart.
//!
//! The readiness follows `AsyncFd`'s documentation: the condition (a flag
//! reached, a count taken) is checked, and readiness cleared only after a
//! check found nothing. tokio clears only the readiness that the guard saw,
//! so a signal that comes after the check is never lost; and an await woken
//! by a readiness that another await cleared meanwhile still gets its turn
//! to check. Several awaits of one slot share one registration.
//!
//! While cuflagd is away nothing signals the eventfds. An await that has
//! heard nothing for [`TICK`] looks whether the daemon hung up; if it did,
//! it looks at the flag itself after each of growing sleeps (as the
//! library's blocking wait does), and the client is resumed from a blocking
//! thread (one attempt at a time, [`RESUME_SPACING`] apart), since a resume
//! can block on a daemon that accepted and has not answered yet. The tick
//! also probes the slot's stream for a device fault, as the blocking wait
//! does every 100 ms.

use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::client::Inner;
use crate::error::{Error, Result};
use crate::slot::Slot;
use crate::{errno, sys};

/// How long an await goes without a signal before it looks for a hang-up
/// and a device fault.
const TICK: Duration = Duration::from_millis(100);
/// Without the daemon, the flag is looked at after sleeps growing from the
/// first to the cap.
const GONE_SLEEP_FIRST: Duration = Duration::from_micros(50);
const GONE_SLEEP_MAX: Duration = Duration::from_millis(2);
/// One resume attempt per this long while the daemon is gone.
const RESUME_SPACING: Duration = Duration::from_millis(25);
/// The resume timeout the library starts with (CUFLAG_RESUME_TIMEOUT_MS).
const DEFAULT_RESUME_TIMEOUT: Duration =
    Duration::from_millis(sys::CUFLAG_RESUME_TIMEOUT_MS as u64);

/// An fd the library owns, as `AsyncFd` takes it: never closed here.
struct Borrowed(RawFd);

impl AsRawFd for Borrowed {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The registration of one eventfd with a runtime's reactor, made at the
/// first await and shared by every await after it.
pub(crate) struct Watch {
    fd: RawFd,
    reg: Mutex<Option<Arc<AsyncFd<Borrowed>>>>,
}

impl Watch {
    /// `fd` < 0: no eventfd of its own (a slot of a group).
    pub(crate) fn new(fd: RawFd) -> Watch {
        Watch {
            fd,
            reg: Mutex::new(None),
        }
    }

    fn get(&self) -> Result<Arc<AsyncFd<Borrowed>>> {
        let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = reg.as_ref() {
            return Ok(r.clone());
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::new(errno::EINVAL, "await outside a tokio runtime"));
        }
        let r = AsyncFd::with_interest(Borrowed(self.fd), Interest::READABLE)
            .map(Arc::new)
            .map_err(|e| Error::new(e.raw_os_error().unwrap_or(errno::EIO), "AsyncFd::new"))?;
        *reg = Some(r.clone());
        Ok(r)
    }

    /// Forget `old`, whose runtime has shut down: the next await registers
    /// with its own.
    fn reset(&self, old: &Arc<AsyncFd<Borrowed>>) {
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

/// Resume attempts for a client's awaits while its daemon is gone.
pub(crate) struct Resumer {
    busy: AtomicBool,
    last: Mutex<Option<Instant>>,
    /// The errno of the last attempt, when only another daemon will mend
    /// it (ESTALE, EOPNOTSUPP, EPROTONOSUPPORT); 0 otherwise.
    fatal: AtomicI32,
    timeout: Mutex<Option<Duration>>,
}

impl Resumer {
    pub(crate) fn new() -> Resumer {
        Resumer {
            busy: AtomicBool::new(false),
            last: Mutex::new(None),
            fatal: AtomicI32::new(0),
            timeout: Mutex::new(Some(DEFAULT_RESUME_TIMEOUT)),
        }
    }

    pub(crate) fn set_timeout(&self, timeout: Option<Duration>) {
        *self.timeout.lock().unwrap_or_else(|e| e.into_inner()) = timeout;
    }

    fn timeout(&self) -> Option<Duration> {
        *self.timeout.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start an attempt in a blocking thread, unless one runs or the last
    /// began less than RESUME_SPACING ago.
    fn kick(client: &Arc<Inner>) {
        let r = &client.resumer;
        if r.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        {
            let mut last = r.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.map_or(false, |t| t.elapsed() < RESUME_SPACING) {
                r.busy.store(false, Ordering::Release);
                return;
            }
            *last = Some(Instant::now());
        }
        let c = client.clone();
        tokio::task::spawn_blocking(move || {
            let rc = unsafe { sys::cuflag_reconnect(c.raw()) };
            let fatal = [errno::ESTALE, errno::EOPNOTSUPP, errno::EPROTONOSUPPORT];
            let e = if fatal.contains(&-rc) { -rc } else { 0 };
            c.resumer.fatal.store(e, Ordering::Release);
            c.resumer.busy.store(false, Ordering::Release);
        });
    }
}

/// What an await waits for.
pub(crate) enum Until<'a> {
    /// A value landing on a slot: checked from the flag, which needs no
    /// daemon; not bounded by the resume timeout.
    Landed(&'a Slot),
    /// A count to hand out: taken only while the daemon is there (the
    /// library may try to resume from a count that finds none, and that
    /// must not block the runtime); bounded by the resume timeout.
    Count(Option<&'a Slot>),
}

/// Await `check()` returning Some, watching `watch`'s eventfd.
pub(crate) async fn until<T, F>(
    client: &Arc<Inner>,
    watch: &Watch,
    what: Until<'_>,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Result<Option<T>>,
{
    let (counts, probe) = match what {
        Until::Landed(s) => (false, Some(s)),
        Until::Count(s) => (true, s),
    };
    let mut gone_since: Option<Instant> = None;
    let mut delay = GONE_SLEEP_FIRST;
    // Whether to check before waiting: not right after a check that
    // cleared the readiness (the next readiness is checked anyway).
    let mut look = true;
    loop {
        if look && (gone_since.is_none() || !counts) {
            if let Some(v) = check()? {
                return Ok(v);
            }
        }
        look = true;
        if let Some(since) = gone_since {
            if !client.daemon_gone() {
                gone_since = None;
                delay = GONE_SLEEP_FIRST;
                continue;
            }
            if counts {
                give_up(client, since)?;
            }
            Resumer::kick(client);
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(GONE_SLEEP_MAX);
            continue;
        }
        let reg = watch.get()?;
        match tokio::time::timeout(TICK, reg.readable()).await {
            Ok(Ok(mut guard)) => {
                if let Some(v) = check()? {
                    return Ok(v);
                }
                guard.clear_ready();
                look = false;
            }
            // The registration's runtime has shut down.
            Ok(Err(_)) => watch.reset(&reg),
            Err(_) => {
                if let Some(s) = probe {
                    fault(s)?;
                }
                if client.daemon_gone() {
                    gone_since = Some(Instant::now());
                }
            }
        }
    }
}

/// A count's await while the daemon is gone: past the resume timeout, or
/// once the daemon that came back refused the client, there is no point.
fn give_up(client: &Arc<Inner>, since: Instant) -> Result<()> {
    let fatal = client.resumer.fatal.load(Ordering::Acquire);
    if fatal != 0 {
        return Err(Error::new(fatal, "cuflag_reconnect"));
    }
    match client.resumer.timeout() {
        Some(t) if since.elapsed() >= t => Err(Error::new(
            errno::ENOTCONN,
            "cuflagd went away and did not come back",
        )),
        _ => Ok(()),
    }
}

/// The slot's last stream, checked for a device fault: its flag will not
/// move again.
fn fault(s: &Slot) -> Result<()> {
    let rc = unsafe { sys::cuflag_cuda_check(s.raw()) };
    if rc == -errno::EIO {
        return Err(Error::new(errno::EIO, "cuflag_cuda_check"));
    }
    Ok(())
}

impl Slot {
    /// The watch that signals this slot: its own, or its group's.
    fn signalled_by(&self) -> &Watch {
        match self.group() {
            Some(g) => &g.watch,
            None => &self.watch,
        }
    }

    /// Wait in the running tokio runtime until the flag reaches `target`;
    /// errors as [`wait`](Slot::wait) (bound it with
    /// `tokio::time::timeout`). Checks the flag first: no system call and
    /// no registration when the value has landed. It goes on across daemon
    /// restarts (looking at the flag while no daemon signals) and leaves
    /// the counts to `consume`. The future is `Send`.
    pub async fn wait_async(&self, target: u32) -> Result<()> {
        until(
            self.client(),
            self.signalled_by(),
            Until::Landed(self),
            || self.landed(target),
        )
        .await
    }

    /// Wait in the running tokio runtime for at least one completion and
    /// return how many landed since the last count (as
    /// [`consume`](Slot::consume), never 0). It goes on across daemon
    /// restarts; `ENOTCONN` if none comes back within the client's resume
    /// timeout, `ESTALE`/`EOPNOTSUPP` if the one that came back refused
    /// the client (nothing is lost: a later count takes what lands).
    pub async fn completions(&self) -> Result<u64> {
        until(
            self.client(),
            self.signalled_by(),
            Until::Count(Some(self)),
            || self.consume().map(|n| if n > 0 { Some(n) } else { None }),
        )
        .await
    }
}

impl crate::Group {
    /// Wait in the running tokio runtime for at least one record, and
    /// return what [`drain`](crate::Group::drain) returns then (never
    /// empty). Across daemon restarts as [`Slot::completions`].
    pub async fn drain_async(&self) -> Result<Vec<(u32, u64)>> {
        let g = self.inner();
        until(&g.client, &g.watch, Until::Count(None), || {
            g.drain().map(|v| if v.is_empty() { None } else { Some(v) })
        })
        .await
    }
}
