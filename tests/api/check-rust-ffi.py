#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Rust declarations of the C API (rust/cuflag-sys) say what the headers
say: the same functions, each with the same return type and the same
argument types (pointer constness included), and the same completion
record. A call declared with another type is undefined behaviour that no
compiler sees: a `void` where the library returns an int, a `*mut` where it
takes a `const` pointer.

    check-rust-ffi.py LIB_RS HEADER...
"""

import re
import sys

# C base types as the Rust declarations name them (std::os::raw, stdint).
BASE = {
    "int": "c_int",
    "unsigned": "c_uint",
    "unsigned int": "c_uint",
    "char": "c_char",
    "void": "c_void",
    "uint32_t": "u32",
    "uint64_t": "u64",
}


def c_to_rust(ctype):
    """A C type as the Rust declaration must write it; None for void."""
    t = re.sub(r"\bstruct\s+", "", ctype)
    stars = t.count("*")
    words = t.replace("*", " ").split()
    const = words[0] == "const"
    # volatile has no Rust spelling: a *mut is how a volatile pointee reads.
    base = " ".join(w for w in words if w not in ("const", "volatile"))
    base = BASE.get(base, base)
    if not stars:
        return None if base == "c_void" else base
    rust = base
    for level in range(stars):
        rust = "*%s %s" % ("const" if const and level == 0 else "mut", rust)
    return rust


def split_args(args):
    args = args.strip()
    return [a.strip() for a in args.split(",")] if args and args != "void" else []


def c_param_type(param):
    """The type of a C parameter (its name dropped)."""
    m = re.match(r"(.*?[\s*])([A-Za-z_]\w*)$", param)
    if not m:
        raise SystemExit("cannot read C parameter %r" % param)
    return m.group(1).strip()


def c_functions(headers):
    funcs = {}
    for path in headers:
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        for m in re.finditer(r"CUFLAG_API\s+([^;(]*?)\b(cuflag_\w+)\s*\(([^)]*)\)\s*;", text):
            ret = c_to_rust(m.group(1).strip())
            args = [c_to_rust(c_param_type(a)) for a in split_args(m.group(3))]
            funcs[m.group(2)] = (ret, args)
    return funcs


def c_completion(headers):
    for path in headers:
        text = open(path, encoding="utf-8").read()
        m = re.search(r"struct cuflag_completion\s*\{([^}]*)\}", text)
        if m:
            fields = [f.strip() for f in m.group(1).split(";") if f.strip()]
            return [(re.findall(r"\w+$", f)[0], c_to_rust(c_param_type(f))) for f in fields]
    raise SystemExit("struct cuflag_completion not found")


def norm(rust):
    return re.sub(r"\s+", " ", rust.strip()) if rust else None


def rust_decls(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"//[^\n]*", "", text)
    funcs = {}
    for block in re.findall(r'extern\s+"C"\s*\{(.*?)\n\}', text, flags=re.S):
        for m in re.finditer(r"pub\s+fn\s+(\w+)\s*\(([^)]*)\)\s*(?:->\s*([^;]+))?;", block):
            args = [norm(a.split(":", 1)[1]) for a in split_args(m.group(2)) if a]
            funcs[m.group(1)] = (norm(m.group(3)), args)
    m = re.search(r"pub struct cuflag_completion\s*\{([^}]*)\}", text)
    fields = re.findall(r"pub\s+(\w+)\s*:\s*([^,]+),", m.group(1)) if m else []
    return funcs, [(n, norm(t)) for n, t in fields]


def main():
    rs, headers = sys.argv[1], sys.argv[2:]
    want, got = c_functions(headers), None
    got, fields = rust_decls(rs)
    bad = []
    for name in sorted(set(want) | set(got)):
        if name not in got:
            bad.append("%s: in the headers, not declared in Rust" % name)
        elif name not in want:
            bad.append("%s: declared in Rust, not in the headers" % name)
        elif want[name] != got[name]:
            bad.append("%s: the headers say (%s) -> %s, Rust says (%s) -> %s" % (
                name, ", ".join(want[name][1]), want[name][0],
                ", ".join(got[name][1]), got[name][0]))
    if fields != c_completion(headers):
        bad.append("struct cuflag_completion: the headers say %s, Rust says %s"
                   % (c_completion(headers), fields))
    for line in bad:
        print(line)
    if bad:
        return 1
    print("rust ffi: %d functions and the completion record as the headers declare them"
          % len(want))
    return 0


if __name__ == "__main__":
    sys.exit(main())
