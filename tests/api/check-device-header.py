#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflag_device.h compiles with nvcc and with NVRTC (where found), and the PTX
made from it carries the documented instructions: st.release.sys.u32 for a
signal, red.release.sys.add.u32 for an advance.
    check-device-header.py CUDADIR INCLUDE_DIR SOURCE.cu OUTDIR
Exits 77 when neither nvcc nor libnvrtc is there."""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

WANT = ("st.release.sys.u32", "red.release.sys.add.u32")
cudadir, incdir, src, outdir = sys.argv[1:5]
os.makedirs(outdir, exist_ok=True)
ran = 0
fail = 0


def check_ptx(who, ptx):
    global fail
    for w in WANT:
        if w not in ptx:
            print("FAIL %s: the PTX lacks %s" % (who, w))
            fail = 1
            return
    print("PASS %s: compiles, PTX has %s" % (who, ", ".join(WANT)))


nvcc = os.path.join(cudadir, "bin", "nvcc")
if not os.access(nvcc, os.X_OK):
    nvcc = shutil.which("nvcc")
if nvcc:
    ran += 1
    ptx = os.path.join(outdir, "header-device.ptx")
    # compute_75: the oldest target CUDA 13 still accepts; C++11 and the
    # default dialect; and machine code for the H100/H200 generation.
    for std in ("-std=c++11", "-std=c++17"):
        r = subprocess.run([nvcc, std, "-arch=compute_75", "-ptx", "-I", incdir, src, "-o", ptx],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            print("FAIL nvcc %s:\n%s" % (std, r.stdout))
            fail = 1
        else:
            check_ptx("nvcc %s" % std, open(ptx).read())
    r = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-I", incdir, src, "-o",
                        os.path.join(outdir, "header-device.cubin")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(("PASS" if r.returncode == 0 else "FAIL") + " nvcc -arch=sm_90 -cubin" +
          ("" if r.returncode == 0 else ":\n" + r.stdout))
    fail |= r.returncode != 0
else:
    print("nvcc not found: not compiled by nvcc")

libs = sorted(glob.glob(os.path.join(cudadir, "lib64", "libnvrtc.so*")) +
              glob.glob(os.path.join(cudadir, "targets", "*", "lib", "libnvrtc.so*")))
libs = [l for l in libs if "builtins" not in l and ".alt." not in l]
if libs:
    ran += 1
    nv = ctypes.CDLL(libs[0])
    prog = ctypes.c_void_p()
    header = open(os.path.join(incdir, "cuflag", "cuflag_device.h"), "rb").read()
    names = (ctypes.c_char_p * 1)(b"cuflag/cuflag_device.h")
    bodies = (ctypes.c_char_p * 1)(header)
    rc = nv.nvrtcCreateProgram(ctypes.byref(prog), open(src, "rb").read(), b"header-device.cu",
                               1, bodies, names)
    opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_75")
    rc = rc or nv.nvrtcCompileProgram(prog, 1, opts)
    if rc:
        size = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        nv.nvrtcGetProgramLog(prog, log)
        print("FAIL NVRTC (%s): %d\n%s" % (libs[0], rc, log.value.decode(errors="replace")))
        fail = 1
    else:
        size = ctypes.c_size_t()
        nv.nvrtcGetPTXSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value + 1)
        nv.nvrtcGetPTX(prog, buf)
        check_ptx("NVRTC " + os.path.basename(libs[0]), buf.value.decode())
else:
    print("libnvrtc not found: not compiled by NVRTC")

# A host compiler alone refuses it, with the header's own message.
cxx = shutil.which("c++") or shutil.which("g++")
if cxx:
    r = subprocess.run([cxx, "-x", "c++", "-fsyntax-only", "-I", incdir, src],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode and "compile it with nvcc or NVRTC" in r.stdout:
        print("PASS %s refuses it: device code only" % os.path.basename(cxx))
    else:
        print("FAIL %s without CUDA: %s" % (cxx, r.stdout or "accepted"))
        fail = 1

if not ran:
    print("neither nvcc nor NVRTC here: skipped")
    sys.exit(77)
sys.exit(fail)
