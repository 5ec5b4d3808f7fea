// SPDX-License-Identifier: MIT
//! The few CUDA Driver API calls the GPU test and the bench make, from
//! libcuda.so.1 loaded at run time (dlopen): nothing to link, and `None`
//! where there is no driver or no GPU, which the test reports as skipped.
//! The work is a one-thread kernel, JIT-compiled from PTX, that runs for a
//! given number of nanoseconds of the GPU's %globaltimer: GPU work of a
//! known length.
#![allow(dead_code)]

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::ptr;

pub type CUresult = c_int;
pub type CUstream = *mut c_void;
type CUcontext = *mut c_void;
type CUmodule = *mut c_void;
type CUfunction = *mut c_void;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;
const RTLD_NOW: c_int = 2;
const CU_STREAM_NON_BLOCKING: c_uint = 1;

extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// `busy(ns)`: one thread that returns once `ns` of %globaltimer passed.
const PTX: &str = "\
.version 6.0
.target sm_50
.address_size 64
.visible .entry busy(.param .u64 ns)
{
	.reg .pred %p;
	.reg .b64 %t<4>;
	ld.param.u64 %t0, [ns];
	mov.u64 %t1, %globaltimer;
	add.u64 %t2, %t1, %t0;
$wait:
	mov.u64 %t3, %globaltimer;
	setp.lt.u64 %p, %t3, %t2;
	@%p bra $wait;
	ret;
}
\0";

/// The driver's entry points, and the context and kernel loaded with them.
pub struct Gpu {
    ctx_set_current: unsafe extern "C" fn(CUcontext) -> CUresult,
    stream_create: unsafe extern "C" fn(*mut CUstream, c_uint) -> CUresult,
    stream_destroy: unsafe extern "C" fn(CUstream) -> CUresult,
    stream_synchronize: unsafe extern "C" fn(CUstream) -> CUresult,
    stream_query: unsafe extern "C" fn(CUstream) -> CUresult,
    launch_kernel: unsafe extern "C" fn(
        CUfunction,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        CUstream,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CUresult,
    ctx: usize,
    busy: usize,
    pub name: String,
}

// The handles are the driver's, usable from any thread once a context is
// current there (make_current).
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

unsafe fn sym<T: Copy>(lib: *mut c_void, name: &str) -> Option<T> {
    let n = CString::new(name).unwrap();
    let p = dlsym(lib, n.as_ptr());
    if p.is_null() {
        None
    } else {
        Some(std::mem::transmute_copy(&p))
    }
}

fn ok(rc: CUresult, what: &str) -> Option<()> {
    if rc == CUDA_SUCCESS {
        Some(())
    } else {
        eprintln!("{}: CUDA error {}", what, rc);
        None
    }
}

impl Gpu {
    /// GPU 0 with its primary context current on this thread, or None
    /// (no libcuda.so.1, no GPU, or the driver refused).
    pub fn open() -> Option<Gpu> {
        unsafe {
            let lib = dlopen(b"libcuda.so.1\0".as_ptr() as *const c_char, RTLD_NOW);
            if lib.is_null() {
                return None;
            }
            let init: unsafe extern "C" fn(c_uint) -> CUresult = sym(lib, "cuInit")?;
            let device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CUresult =
                sym(lib, "cuDeviceGet")?;
            let device_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CUresult =
                sym(lib, "cuDeviceGetName")?;
            let retain: unsafe extern "C" fn(*mut CUcontext, c_int) -> CUresult =
                sym(lib, "cuDevicePrimaryCtxRetain")?;
            let module_load: unsafe extern "C" fn(*mut CUmodule, *const c_void) -> CUresult =
                sym(lib, "cuModuleLoadData")?;
            let get_function: unsafe extern "C" fn(
                *mut CUfunction,
                CUmodule,
                *const c_char,
            ) -> CUresult = sym(lib, "cuModuleGetFunction")?;
            if init(0) != CUDA_SUCCESS {
                return None; // a driver without a GPU
            }
            let mut dev = 0;
            device_get(&mut dev, 0);
            let mut name = [0 as c_char; 128];
            device_name(name.as_mut_ptr(), name.len() as c_int, dev);
            let name = std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned();
            let mut ctx = ptr::null_mut();
            ok(retain(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            let gpu = Gpu {
                ctx_set_current: sym(lib, "cuCtxSetCurrent")?,
                stream_create: sym(lib, "cuStreamCreate")?,
                stream_destroy: sym(lib, "cuStreamDestroy_v2")?,
                stream_synchronize: sym(lib, "cuStreamSynchronize")?,
                stream_query: sym(lib, "cuStreamQuery")?,
                launch_kernel: sym(lib, "cuLaunchKernel")?,
                ctx: ctx as usize,
                busy: 0,
                name,
            };
            gpu.make_current();
            let mut module = ptr::null_mut();
            ok(
                module_load(&mut module, PTX.as_ptr() as *const c_void),
                "cuModuleLoadData",
            )?;
            let mut busy = ptr::null_mut();
            ok(
                get_function(&mut busy, module, b"busy\0".as_ptr() as *const c_char),
                "cuModuleGetFunction",
            )?;
            Some(Gpu {
                busy: busy as usize,
                ..gpu
            })
        }
    }

    /// Make the context current on the calling thread (each thread that
    /// launches: a runtime's on_thread_start).
    pub fn make_current(&self) {
        unsafe { (self.ctx_set_current)(self.ctx as CUcontext) };
    }

    pub fn stream(&self) -> CUstream {
        let mut s = ptr::null_mut();
        let rc = unsafe { (self.stream_create)(&mut s, CU_STREAM_NON_BLOCKING) };
        assert_eq!(rc, CUDA_SUCCESS, "cuStreamCreate");
        s
    }

    pub fn destroy(&self, s: CUstream) {
        unsafe { (self.stream_destroy)(s) };
    }

    /// Queue `ns` nanoseconds of GPU work on `s`.
    pub fn busy(&self, s: CUstream, ns: u64) {
        let mut ns = ns;
        let mut args = [&mut ns as *mut u64 as *mut c_void];
        let rc = unsafe {
            (self.launch_kernel)(
                self.busy as CUfunction,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                s,
                args.as_mut_ptr(),
                ptr::null_mut(),
            )
        };
        assert_eq!(rc, CUDA_SUCCESS, "cuLaunchKernel");
    }

    pub fn synchronize(&self, s: CUstream) -> CUresult {
        unsafe { (self.stream_synchronize)(s) }
    }

    /// CUDA_SUCCESS once the stream's work is done, CUDA_ERROR_NOT_READY
    /// before.
    pub fn query(&self, s: CUstream) -> CUresult {
        unsafe { (self.stream_query)(s) }
    }
}
