// SPDX-License-Identifier: MIT
//! Many slots, one eventfd, one completion ring: [`Group`].

use std::collections::hash_map::{Entry, HashMap};
use std::os::unix::io::RawFd;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

use crate::client::Inner;
use crate::error::{check, Result};
use crate::slot::{Owner, Slot};
use crate::sys;

/// Records taken from the library per call.
const BATCH: usize = 1024;
/// Calls per drain at most: a group completing faster than it is drained
/// still lets the drain return (its fd stays readable for the rest).
const MAX_BATCHES: usize = 64;

pub(crate) struct GroupInner {
    ptr: NonNull<sys::cuflag_group>,
    /// Kept alive while the group is (read by the futures).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) client: Arc<Inner>,
    /// Held while a drain turns the library's slot pointers into ids, and
    /// while a slot of the group is released: a pointer a drain returned
    /// stays valid until the drain is done with it.
    records: Mutex<()>,
    #[cfg(feature = "tokio")]
    pub(crate) watch: crate::watch::Watch,
}

// As for slots: every library call on a group may run on several threads at
// once, except cuflag_group_destroy(), which only the last owner's Drop
// makes, after every slot of the group is gone (they hold the group).
unsafe impl Send for GroupInner {}
unsafe impl Sync for GroupInner {}

impl GroupInner {
    pub(crate) fn raw(&self) -> *mut sys::cuflag_group {
        self.ptr.as_ptr()
    }

    pub(crate) fn fd(&self) -> RawFd {
        unsafe { sys::cuflag_group_fd(self.raw()) }
    }

    pub(crate) fn release(&self, slot: *mut sys::cuflag_slot) {
        let _held = self.records.lock().unwrap_or_else(|e| e.into_inner());
        unsafe { sys::cuflag_slot_release(slot) }
    }

    pub(crate) fn drain(&self) -> Result<Vec<(u32, u64)>> {
        let mut out: Vec<(u32, u64)> = Vec::new();
        let mut buf = vec![
            sys::cuflag_completion {
                slot: ptr::null_mut(),
                completions: 0
            };
            BATCH
        ];
        // A slot that completes again while the drain runs has a record in
        // a later batch (or later in the same one): one entry per slot, its
        // counts summed, as the Python package's drain() hands them out.
        let mut at: HashMap<u32, usize> = HashMap::new();
        let _held = self.records.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..MAX_BATCHES {
            let n = check(
                unsafe { sys::cuflag_group_drain(self.raw(), buf.as_mut_ptr(), BATCH as u32) },
                "cuflag_group_drain",
            )? as usize;
            for rec in &buf[..n] {
                let id = unsafe { sys::cuflag_slot_id(rec.slot) } as u32;
                match at.entry(id) {
                    Entry::Occupied(e) => out[*e.get()].1 += rec.completions,
                    Entry::Vacant(e) => {
                        e.insert(out.len());
                        out.push((id, rec.completions));
                    }
                }
            }
            if n < BATCH {
                break;
            }
        }
        Ok(out)
    }
}

impl Drop for GroupInner {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        self.watch.close();
        // Its slots hold the group: none is left (no EBUSY).
        let rc = unsafe { sys::cuflag_group_destroy(self.raw()) };
        debug_assert_eq!(rc, 0, "cuflag_group_destroy");
    }
}

/// Slots that share one eventfd and one completion ring: the daemon holds
/// one fd for the group instead of one per slot, and a program reads one fd
/// per pass of the daemon's scanner however many of its slots completed.
///
/// Slots of a group arm, store, wait and consume as any slot; they have no
/// eventfd of their own. [`drain`](Group::drain) says which completed and
/// how many times; every completion is handed out exactly once, whichever
/// of drain and the slot's own consume takes it, also when the ring
/// overflowed and across daemon restarts. `Group` is `Send + Sync`; the
/// group lives on until its last slot is dropped.
pub struct Group {
    inner: Arc<GroupInner>,
}

impl Group {
    pub(crate) fn create(client: &Arc<Inner>) -> Result<Group> {
        let mut out = ptr::null_mut();
        check(
            unsafe { sys::cuflag_group_create(client.raw(), &mut out) },
            "cuflag_group_create",
        )?;
        let ptr = NonNull::new(out).expect("cuflag_group_create succeeded without a group");
        Ok(Group {
            inner: Arc::new(GroupInner {
                ptr,
                client: client.clone(),
                records: Mutex::new(()),
                #[cfg(feature = "tokio")]
                watch: crate::watch::Watch::new(),
            }),
        })
    }

    /// A slot of the group. Errors as [`Client::acquire`](crate::Client::acquire).
    pub fn acquire(&self) -> Result<Slot> {
        let mut out = ptr::null_mut();
        check(
            unsafe { sys::cuflag_group_slot_acquire(self.inner.raw(), &mut out) },
            "cuflag_group_slot_acquire",
        )?;
        Ok(unsafe { Slot::new(out, Owner::Group(self.inner.clone())) })
    }

    /// [`Client::import_slot`](crate::Client::import_slot) into the group.
    /// When the exporter's slot goes, a drain hands out one record of 0
    /// completions for it.
    pub fn import_slot(&self, fd: impl std::os::unix::io::AsFd) -> Result<Slot> {
        use std::os::unix::io::AsRawFd;
        let mut out = ptr::null_mut();
        check(
            unsafe {
                sys::cuflag_group_slot_import(self.inner.raw(), fd.as_fd().as_raw_fd(), &mut out)
            },
            "cuflag_group_slot_import",
        )?;
        Ok(unsafe { Slot::new(out, Owner::Group(self.inner.clone())) })
    }

    /// `n` slots of the group in as few round trips as possible; all or
    /// nothing. Errors as [`acquire`](Group::acquire), `EINVAL` for 0.
    pub fn acquire_many(&self, n: usize) -> Result<Vec<Slot>> {
        let g = self.inner.raw();
        Slot::many(
            n,
            "cuflag_group_slots_acquire",
            |k, out| unsafe { sys::cuflag_group_slots_acquire(g, k, out) },
            || Owner::Group(self.inner.clone()),
        )
    }

    /// The group's slots that completed since they were last drained or
    /// consumed: (slot id, completions) records, empty when none;
    /// non-blocking. Each slot comes at most once per call: completions it
    /// made while the drain ran are summed into its record. Errors:
    /// `ECHILD`.
    pub fn drain(&self) -> Result<Vec<(u32, u64)>> {
        self.inner.drain()
    }

    /// The group's eventfd: readable while records wait. Poll it, then
    /// [`drain`](Group::drain); never read or close it.
    pub fn fd(&self) -> RawFd {
        self.inner.fd()
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn inner(&self) -> &Arc<GroupInner> {
        &self.inner
    }
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("fd", &self.fd()).finish()
    }
}
