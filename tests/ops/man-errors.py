#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Each exported function's errors, as its comment in the public headers
lists them (every -EXXX in the comment above its declaration, and every
system call name(2) its Return: names), are in its
entry of libcuflag-client(3): in the entry itself, in the entries it
refers to ("those of cuflag_x()", "an error of cuflag_x()"), or, for
-ECHILD, in the DESCRIPTION's list of calls a child of fork(2) is refused.
Functions with no entry are left to man-coverage.sh's own check.
    man-errors.py SOURCE_ROOT"""
import glob
import re
import sys

src = sys.argv[1]
page = open(f"{src}/man/libcuflag-client.3").read()


def header_errors():
    out = {}
    for h in sorted(glob.glob(f"{src}/client/include/cuflag/*.h")):
        text = open(h).read()
        for m in re.finditer(r"/\*(?:(?!\*/).)*\*/\s*CUFLAG_API[^;(]*?[ *](cuflag_\w+)\(", text,
                             re.S):
            comment = m.group(0)
            # -EXXX, and the system calls whose errno it may pass on: read(2)
            out[m.group(1)] = (set(re.findall(r"-E[A-Z0-9]+", comment)) |
                               set(re.findall(r"\b(\w+)\(2\)", comment.split("Return:")[-1])))
    return out


def entries():
    """{function: the text of its entry}, an entry running to the next."""
    body = page.split("\n.SH ENVIRONMENT")[0]
    parts = re.split(r"\n\.TP\n\.BR (cuflag_\w+) \(\)\n", body)
    out = {}
    for name, text in zip(parts[1::2], parts[2::2]):
        out[name] = re.split(r"\n\.S[HS] ", text)[0]
    return out


def man_errors(text):
    return ({e.replace("\\-", "-") for e in re.findall(r"\\-E[A-Z0-9]+", text)} |
            {c.replace("\\-", "-").replace("\\", "") for c in re.findall(r"\.BR ([\w\\-]+) \(2\)", text)})


def main():
    ent = entries()
    desc = page.split("\n.SH DESCRIPTION")[1].split("\n.SS ")[0]
    child = desc[desc.index("ECHILD"):] if "ECHILD" in desc else ""
    child_calls = set(re.findall(r"(cuflag_\w+) \(\)", child.split("\n.PP")[0]))
    fail = 0
    for fn, want in header_errors().items():
        if fn not in ent:
            continue
        have, seen, todo = set(), set(), [fn]
        while todo:  # the entry and those it refers to for its errors
            f = todo.pop()
            if f in seen or f not in ent:
                continue
            seen.add(f)
            have |= man_errors(ent[f])
            todo += re.findall(r"(?:those|an? errors?|the errors) (?:of|as for)\s+\.BR (cuflag_\w+) \(\)",
                               ent[f])
        if fn in child_calls:
            have.add("-ECHILD")
        for e in sorted(want - have):
            what = e if e.startswith("-E") else f"an errno of {e}(2)"
            print(f"libcuflag-client.3: {fn}: {what} (in its header comment) not in its entry")
            fail = 1
    if not fail:
        print(f"man errors: the errors of {len(ent)} entries agree with the headers")
    return fail


if __name__ == "__main__":
    sys.exit(main())
