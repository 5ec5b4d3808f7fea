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
    // Of a connect: the socket named (a path, or $CUFLAG_SOCKET), and the
    // library's hint taken when it failed (it is the calling thread's and
    // static: it names the sockets tried when none was named).
    socket: Socket,
    hint: Option<&'static str>,
}

/// A socket path kept inline, so that Error stays `Copy`: as long as a Unix
/// socket's path can be (108 bytes); a longer one is cut, and says so.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Socket {
    len: u8,
    cut: bool,
    bytes: [u8; 108],
}

impl Socket {
    const NONE: Socket = Socket {
        len: 0,
        cut: false,
        bytes: [0; 108],
    };

    fn new(path: &str) -> Socket {
        let mut s = Socket::NONE;
        let mut n = path.len().min(s.bytes.len());
        while !path.is_char_boundary(n) {
            n -= 1;
        }
        s.bytes[..n].copy_from_slice(&path.as_bytes()[..n]);
        s.len = n as u8;
        s.cut = n < path.len();
        s
    }

    fn get(&self) -> Option<&str> {
        if self.len == 0 {
            return None;
        }
        std::str::from_utf8(&self.bytes[..self.len as usize]).ok()
    }
}

/// `std::result::Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with a (positive) errno from the named call.
    pub fn new(errno: i32, call: &'static str) -> Error {
        Error {
            errno,
            call,
            socket: Socket::NONE,
            hint: None,
        }
    }

    /// The error of a connect that failed with (positive) errno, just
    /// after the failed call, on its thread: the socket named (`path`,
    /// else `$CUFLAG_SOCKET`) and the library's hint, which names the
    /// sockets tried when none was named.
    pub(crate) fn connect_failed(errno: i32, path: Option<&str>) -> Error {
        let named = path.map(str::to_owned).or_else(|| {
            std::env::var("CUFLAG_SOCKET")
                .ok()
                .filter(|p| !p.is_empty())
        });
        let mut e = Error::new(errno, "cuflag_connect");
        e.socket = named.as_deref().map_or(Socket::NONE, Socket::new);
        e.hint = library_hint(errno);
        e
    }

    /// For an error of [`Client::connect`](crate::Client::connect) that
    /// named a socket (or `$CUFLAG_SOCKET` did), that socket's path.
    pub fn socket(&self) -> Option<&str> {
        self.socket.get()
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
        self.hint.or_else(|| library_hint(self.errno))
    }

    /// Whether a wait ran out of time (`ETIMEDOUT`).
    pub fn is_timeout(&self) -> bool {
        self.errno == crate::errno::ETIMEDOUT
    }
}

/// cuflag_connect_hint() for a (positive) errno.
fn library_hint(errno: i32) -> Option<&'static str> {
    let p = unsafe { crate::sys::cuflag_connect_hint(-errno) };
    if p.is_null() {
        return None;
    }
    unsafe { std::ffi::CStr::from_ptr(p) }.to_str().ok()
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
        // "cuflag_connect /run/x.sock: No such file or directory (os
        // error 2): start cuflagd ..." (io::Error's text is strerror(3)
        // plus " (os error N)").
        write!(f, "{}", self.call)?;
        if let Some(p) = self.socket() {
            write!(f, " {}{}", p, if self.socket.cut { "..." } else { "" })?;
        }
        write!(f, ": {}", io::Error::from_raw_os_error(self.errno))?;
        match self.hint() {
            Some(h) => write!(f, ": {}", h),
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
            .field("socket", &self.socket())
            .field("hint", &self.hint())
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
