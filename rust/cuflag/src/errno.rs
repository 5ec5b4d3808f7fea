// SPDX-License-Identifier: MIT
//! The errno values this crate's calls return that a program may want to
//! tell apart (Linux's numbers), so that it needs no `libc` crate to
//! compare [`Error::errno`](crate::Error::errno).

pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const EIO: i32 = 5;
pub const EBADF: i32 = 9;
pub const ECHILD: i32 = 10;
pub const EAGAIN: i32 = 11;
pub const EBUSY: i32 = 16;
pub const ENODEV: i32 = 19;
pub const EINVAL: i32 = 22;
pub const ENOSPC: i32 = 28;
pub const EPIPE: i32 = 32;
pub const ENOSYS: i32 = 38;
pub const EOVERFLOW: i32 = 75;
pub const EPROTONOSUPPORT: i32 = 93;
pub const EOPNOTSUPP: i32 = 95;
pub const ENOTCONN: i32 = 107;
pub const ETIMEDOUT: i32 = 110;
pub const ECONNREFUSED: i32 = 111;
pub const ESTALE: i32 = 116;
