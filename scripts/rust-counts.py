#!/usr/bin/env python3
"""'make rust-counts': how much of the handoff's Rust reaches past rust/kernel.

Counts, in the handoff's leaf code (kernel/thread_handoff.rs and io_uring/*.rs
of the assembled work tree), what issue #13 [rust-abstractions] bounds: unsafe
blocks and unsafe fns, uses of `bindings::`, `__bindgen_anon` paths, raw task
pointer parameters, and the longest unsafe block. Comments are not counted; an
unsafe block split over lines is. Prints a markdown table and exits 1 if a
bound is exceeded (at most 30 unsafe blocks, 50 `bindings::` uses, no
`__bindgen_anon`), 2 on a usage error.

usage: rust-counts.py WORK_TREE
"""
import glob
import os
import re
import sys

BOUNDS = {"unsafe blocks": 30, "bindings:: uses": 50, "__bindgen_anon": 0}
RAW_TASK = re.compile(r"\*(?:mut|const)\s+(?:bindings::task_struct|RawTask)\b")


def strip_comments(src):
    """Blank out // comments and string literals, keeping line numbers."""
    out = []
    for line in src.split("\n"):
        line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        out.append(re.sub(r"//.*", "", line))
    return "\n".join(out)


def block_len(code, start):
    """Lines spanned by the block whose `{` is at or after @start."""
    i = code.index("{", start)
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return code.count("\n", i, j) + 1
    return code.count("\n", i) + 1


def count(path):
    code = strip_comments(open(path, encoding="utf-8").read())
    blocks = [m.start() for m in re.finditer(r"\bunsafe\s*\{", code)]
    fns = re.findall(r"\bunsafe\s+(?:extern\s+\"\"\s+)?fn\b", code)
    raw_fns = 0
    raw_params = 0
    for m in re.finditer(r"\bfn\s+\w+[^(]*\(([^)]*)\)", code):
        n = len(RAW_TASK.findall(m.group(1)))
        raw_params += n
        raw_fns += n > 0
    return {
        "unsafe blocks": len(blocks),
        "unsafe fns": len(fns),
        "bindings:: uses": len(re.findall(r"\bbindings::", code)),
        "__bindgen_anon": len(re.findall(r"__bindgen_anon", code)),
        "raw task pointer params": raw_params,
        "fns taking them": raw_fns,
        "longest unsafe block (lines)": max((block_len(code, b) for b in blocks), default=0),
    }


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__.strip().split("\n")[-1], file=sys.stderr)
        return 2
    work = sys.argv[1]
    files = ["kernel/thread_handoff.rs"] + sorted(
        os.path.relpath(p, work) for p in glob.glob(os.path.join(work, "io_uring/*.rs")))
    missing = [f for f in files if not os.path.isfile(os.path.join(work, f))]
    if missing:
        print(f"rust-counts: {', '.join(missing)} not in {work}: assemble the series first",
              file=sys.stderr)
        return 2
    per = {f: count(os.path.join(work, f)) for f in files}
    keys = list(next(iter(per.values())))
    total = {k: (max if k.startswith("longest") else sum)(per[f][k] for f in files)
             for k in keys}
    print("| | " + " | ".join(files) + " | total |")
    print("|---|" + "--:|" * (len(files) + 1))
    for k in keys:
        print(f"| {k} | " + " | ".join(str(per[f][k]) for f in files) + f" | {total[k]} |")
    over = [f"{k} {total[k]} > {b}" for k, b in BOUNDS.items() if total[k] > b]
    if over:
        print("rust-counts: over the bound: " + ", ".join(over), file=sys.stderr)
        return 1
    print(f"rust-counts: within the bounds ({', '.join(f'{k} <= {b}' for k, b in BOUNDS.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
