// SPDX-License-Identifier: MIT
//! The library's negative errno, as a Rust error.

use std::fmt;
use std::io;

/// What a call of this crate failed with: the errno libcuflag-client
/// returned (its header and libcuflag-client(3) list each call's), and the
/// call that returned it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Error {
    errno: i32,
    call: &'static str,
}

/// `std::result::Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with a (positive) errno from the named call.
    pub fn new(errno: i32, call: &'static str) -> Error {
        Error { errno, call }
    }

    /// The errno (positive: `ENOENT`, `ETIMEDOUT`, ...), as `std::io` and
    /// the `libc` crate spell them.
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The library call (or the crate's own step) that failed.
    pub fn call(&self) -> &'static str {
        self.call
    }

    /// The errno's kind, as `std::io::Error` classifies it.
    pub fn kind(&self) -> io::ErrorKind {
        io::Error::from_raw_os_error(self.errno).kind()
    }

    /// For an error of [`Client::connect`](crate::Client::connect), what to
    /// do about it (join the socket's group, start cuflagd or set
    /// `CUFLAG_SOCKET`, ...), as the library words it; else None.
    pub fn hint(&self) -> Option<&'static str> {
        if self.call != "cuflag_connect" {
            return None;
        }
        let p = unsafe { crate::sys::cuflag_connect_hint(-self.errno) };
        if p.is_null() {
            return None;
        }
        unsafe { std::ffi::CStr::from_ptr(p) }.to_str().ok()
    }

    /// Whether a wait ran out of time (`ETIMEDOUT`).
    pub fn is_timeout(&self) -> bool {
        self.errno == crate::errno::ETIMEDOUT
    }
}

/// 0 (or any value >= 0) from the library is `Ok(value)`, a negative value
/// is the errno.
pub(crate) fn check(rc: i32, call: &'static str) -> Result<i32> {
    if rc < 0 {
        Err(Error::new(-rc, call))
    } else {
        Ok(rc)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // io::Error's text is strerror(3) plus " (os error N)".
        write!(
            f,
            "{}: {}",
            self.call,
            io::Error::from_raw_os_error(self.errno)
        )?;
        match self.hint() {
            Some(h) => write!(f, " ({})", h),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("errno", &self.errno)
            .field("call", &self.call)
            .field("kind", &self.kind())
            .finish()
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    /// The errno as an OS error: `raw_os_error()` gives it back, `kind()`
    /// classifies it (`NotFound` for `ENOENT`, ...).
    fn from(e: Error) -> io::Error {
        io::Error::from_raw_os_error(e.errno)
    }
}
