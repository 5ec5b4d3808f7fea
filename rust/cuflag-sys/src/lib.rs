// SPDX-License-Identifier: MIT
//! Raw declarations of libcuflag-client (`cuflag/cuflag.h` and
//! `cuflag/cuflag_cuda.h`), one for one, with nothing added: every function
//! returns 0 or a negative errno unless noted, and the C header lists the
//! errors of each. The safe API is the `cuflag` crate.
//!
//! The CUDA calls are always exported by the library: one built without the
//! CUDA binding answers them with `-ENOSYS`.
#![allow(non_camel_case_types)]

// std::os::raw, not core::ffi: its integer types need rustc 1.64.
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// A connection to cuflagd and the region it shares with this process.
#[repr(C)]
pub struct cuflag_client {
    _private: [u8; 0],
}

/// One completion timeline: a flag and an eventfd (or its group's).
#[repr(C)]
pub struct cuflag_slot {
    _private: [u8; 0],
}

/// Many slots that share one eventfd and report through a completion ring.
#[repr(C)]
pub struct cuflag_group {
    _private: [u8; 0],
}

/// What `cuflag_group_drain()` hands out: a slot and its new completions.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuflag_completion {
    pub slot: *mut cuflag_slot,
    pub completions: u64,
}

/// The Driver API's `CUstream` (`struct CUstream_st *`); null is the legacy
/// default stream.
pub type CUstream = *mut c_void;

/// The Driver API's `CUdeviceptr`.
pub type CUdeviceptr = u64;

/// How long a call that needs the daemon waits for it after a restart, by
/// default (`cuflag_client_set_resume_timeout()`).
pub const CUFLAG_RESUME_TIMEOUT_MS: c_int = 30000;

extern "C" {
    pub fn cuflag_connect(socket_path: *const c_char, out: *mut *mut cuflag_client) -> c_int;
    /// Not an errno: a static sentence, or null.
    pub fn cuflag_connect_hint(err: c_int) -> *const c_char;
    pub fn cuflag_disconnect(c: *mut cuflag_client);
    pub fn cuflag_slot_acquire(c: *mut cuflag_client, out: *mut *mut cuflag_slot) -> c_int;
    pub fn cuflag_slots_acquire(
        c: *mut cuflag_client,
        n: c_uint,
        out: *mut *mut cuflag_slot,
    ) -> c_int;
    pub fn cuflag_slot_release(s: *mut cuflag_slot);
    pub fn cuflag_slot_fd(s: *const cuflag_slot) -> c_int;
    pub fn cuflag_slot_flag(s: *const cuflag_slot) -> *mut u32;
    pub fn cuflag_slot_id(s: *const cuflag_slot) -> c_int;
    pub fn cuflag_slot_complete(s: *mut cuflag_slot, value: u32) -> c_int;
    pub fn cuflag_slot_set_data(s: *mut cuflag_slot, data: *mut c_void) -> c_int;
    pub fn cuflag_slot_data(s: *const cuflag_slot) -> *mut c_void;
    pub fn cuflag_slot_arm(s: *mut cuflag_slot, target: *mut u32) -> c_int;
    pub fn cuflag_slot_arm_many(s: *mut cuflag_slot, n: c_uint, first: *mut u32) -> c_int;
    pub fn cuflag_slot_wait(s: *mut cuflag_slot, target: u32, timeout_ms: c_int) -> c_int;
    pub fn cuflag_slot_wait_spin(
        s: *mut cuflag_slot,
        target: u32,
        spin_us: c_uint,
        timeout_ms: c_int,
    ) -> c_int;
    pub fn cuflag_slot_consume(s: *mut cuflag_slot, completions: *mut u64) -> c_int;
    pub fn cuflag_slot_bind_eventfd(s: *mut cuflag_slot, efd: c_int) -> c_int;
    pub fn cuflag_client_fd(c: *const cuflag_client) -> c_int;
    pub fn cuflag_reconnect(c: *mut cuflag_client) -> c_int;
    pub fn cuflag_client_set_resume_timeout(c: *mut cuflag_client, timeout_ms: c_int) -> c_int;
    pub fn cuflag_group_create(c: *mut cuflag_client, out: *mut *mut cuflag_group) -> c_int;
    pub fn cuflag_group_destroy(g: *mut cuflag_group) -> c_int;
    pub fn cuflag_group_fd(g: *const cuflag_group) -> c_int;
    pub fn cuflag_group_slot_acquire(g: *mut cuflag_group, out: *mut *mut cuflag_slot) -> c_int;
    pub fn cuflag_group_slots_acquire(
        g: *mut cuflag_group,
        n: c_uint,
        out: *mut *mut cuflag_slot,
    ) -> c_int;
    pub fn cuflag_slot_export(s: *mut cuflag_slot, fd: *mut c_int) -> c_int;
    pub fn cuflag_slot_import(c: *mut cuflag_client, fd: c_int, out: *mut *mut cuflag_slot)
        -> c_int;
    pub fn cuflag_group_slot_import(
        g: *mut cuflag_group,
        fd: c_int,
        out: *mut *mut cuflag_slot,
    ) -> c_int;
    pub fn cuflag_group_drain(
        g: *mut cuflag_group,
        out: *mut cuflag_completion,
        max: c_uint,
    ) -> c_int;
    pub fn cuflag_client_dispatch_fd(c: *mut cuflag_client) -> c_int;
    pub fn cuflag_client_dispatch(c: *mut cuflag_client) -> c_int;
    pub fn cuflag_client_dispatch_timeout(c: *mut cuflag_client, timeout_ms: *mut c_int) -> c_int;
    pub fn cuflag_client_epoch(c: *const cuflag_client) -> u64;
    /// Not an errno: a static NUL-terminated "MAJOR.MINOR.PATCH".
    pub fn cuflag_version() -> *const c_char;

    pub fn cuflag_cuda_signal(s: *mut cuflag_slot, stream: CUstream, target: *mut u32) -> c_int;
    pub fn cuflag_cuda_launched(s: *mut cuflag_slot, stream: CUstream, target: *mut u32) -> c_int;
    pub fn cuflag_cuda_slot_devptr(s: *mut cuflag_slot, out: *mut CUdeviceptr) -> c_int;
    /// 1 (capturing), 0 (not), or a negative errno.
    pub fn cuflag_cuda_capturing(stream: CUstream) -> c_int;
    pub fn cuflag_cuda_check(s: *mut cuflag_slot) -> c_int;
    pub fn cuflag_cuda_wait(s: *mut cuflag_slot, stream: CUstream, value: u32) -> c_int;
}
