#!/usr/bin/env bash
# Report of a 'make bench' run: bench-report.sh RUN_DIR
# Reads RUN_DIR/bench.results (lines "pass=<p> rep=<r> op=.. fs=.. qd=.. ops=..
# secs=.. ops_s=.. cpu_pct=..", written by scripts/guest/bench.sh) and
# RUN_DIR/bench.env, writes RUN_DIR/bench.md (tables, printed too) and
# RUN_DIR/bench.svg (bar chart of ops/s, baseline vs handoff per case).
# Pass 0 is the baseline, pass 1 the handoff, "base" a kernel without the
# sysctl. Exit status: 0 when both files are written, 1 on a tooling error
# (no results, unreadable lines); timing never fails.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# = 1 ] || die "usage: bench-report.sh RUN_DIR"
RUN=$1
[ -s "$RUN/bench.results" ] || die "no results in $RUN/bench.results"
need_tool python3 python3

python3 - "$RUN" <<'PY'
import html
import math
import os
import statistics
import sys

run = sys.argv[1]

# ---------------------------------------------------------------- input
def parse_line(line):
    d = {}
    for tok in line.split():
        k, sep, v = tok.partition("=")
        if not sep:
            raise ValueError(f"not key=value: {tok!r}")
        d[k] = v
    for k in ("pass", "op", "fs", "qd", "ops_s", "cpu_pct"):
        if k not in d:
            raise ValueError(f"missing {k}=")
    return d

groups = {}       # (op, fs, qd) -> {pass: [(ops_s, cpu_pct)]}
by_rep = {}       # (op, fs, qd) -> {rep: {pass: ops_s}}
order = []        # keys in order of first appearance
passes = []       # pass labels in order of first appearance
bad = 0
with open(os.path.join(run, "bench.results")) as f:
    for n, line in enumerate(f, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            d = parse_line(line)
            key = (d["op"], d["fs"], int(d["qd"]))
            val = (float(d["ops_s"]), float(d["cpu_pct"]))
        except ValueError as e:
            print(f"bench-report: bench.results:{n}: {e}", file=sys.stderr)
            bad += 1
            continue
        if key not in groups:
            groups[key] = {}
            order.append(key)
        if d["pass"] not in passes:
            passes.append(d["pass"])
        groups[key].setdefault(d["pass"], []).append(val)
        if "rep" in d:
            by_rep.setdefault(key, {}).setdefault(d["rep"], {})[d["pass"]] = val[0]
if not order:
    print("bench-report: no usable results", file=sys.stderr)
    sys.exit(1)
# baseline first, then handoff, then anything else
rank = {"base": 0, "0": 1, "1": 2}
passes.sort(key=lambda p: (rank.get(p, 3), p))

env = {}
try:
    with open(os.path.join(run, "bench.env")) as f:
        for line in f:
            k, sep, v = line.rstrip("\n").partition("=")
            if sep:
                env[k] = v
except OSError:
    pass
try:
    with open(os.path.join(run, "accel")) as f:
        accel = f.read().strip().upper() or "TCG"
except OSError:
    accel = "TCG"
errors = []
try:
    with open(os.path.join(run, "bench.errors")) as f:
        errors = [l.rstrip("\n") for l in f if l.strip()]
except OSError:
    pass

# ---------------------------------------------------------------- formatting
def fmt_rate(v):
    if v < 1e3:
        return f"{v:.0f}"
    if v < 1e5:
        return f"{v / 1e3:.1f}k"
    if v < 1e6:
        return f"{v / 1e3:.0f}k"
    if v < 1e7:
        return f"{v / 1e6:.2f}M"
    return f"{v / 1e6:.1f}M"

def fmt_share(v):
    return f"{v:.1f}%" if v < 10 else f"{v:.0f}%"

def fmt_pct(v):
    return f"{v:.0f}%"

def fmt_change(new, old):
    if old <= 0:
        return "n/a"
    pct = round((new - old) / old * 100)
    return f"{pct:+d}%" if pct else "+0%"

def pass_label(p):
    return {"0": "baseline", "1": "handoff", "base": "base"}.get(p, f"sysctl={p}")

OP_LABEL = {
    "fadvise": "fadvise DONTNEED",
    "openat": "openat O_TMPFILE",
    "splice": "splice to pipe",
}

def case_label(key):
    op, fs, qd = key
    if op.startswith("sys-"):
        base = op[4:]
        return f"{OP_LABEL.get(base, base)}, {fs}, syscall loop"
    return f"{OP_LABEL.get(op, op)}, {fs}, qd {qd}"

def short_label(key):
    op, fs, qd = key
    return f"{op} {fs}" if op.startswith("sys-") else f"{op} {fs} qd{qd}"

class Stat:
    def __init__(self, vals):
        self.n = len(vals)
        # the median: under TCG single runs stray by 10-20%, see README.md
        self.mid = statistics.median(vals)
        self.lo = min(vals)
        self.hi = max(vals)

def stats(key, p):
    vals = groups[key].get(p)
    if not vals:
        return None, None
    return Stat([v[0] for v in vals]), Stat([v[1] for v in vals])

def cell(s, fmt, unit=""):
    if s.n == 1:
        return fmt(s.mid)
    lo, hi = fmt(s.lo), fmt(s.hi)
    if unit:
        lo, hi = lo.rstrip(unit), hi.rstrip(unit) + unit
    return f"{fmt(s.mid)} ({lo}-{hi})"

def overlap(a, b):
    return a.n > 1 and b.n > 1 and a.lo <= b.hi and b.lo <= a.hi

nruns = sorted({len(v) for g in groups.values() for v in g.values()})
have_change = "0" in passes and "1" in passes

# ---------------------------------------------------------------- markdown
md = []
md.append("# io_uring thread identity handoff: benchmark")
md.append("")
meta = [
    ("kernel", f"{env.get('kernel', '?')} {env.get('build', '')}".strip()),
    ("config", env.get("kconfig", "")),
    ("guest", f"{env.get('arch', 'x86_64')}, {env.get('cpus', '?')} vCPUs, {int(env['mem_kb']) // 1024} MiB, clocksource {env.get('clocksource', '?')} ({accel})"
        if env.get("mem_kb", "").isdigit() else ""),
    ("passes", ", ".join(f"{p} = {pass_label(p)}" for p in passes)),
    ("runs", f"{'/'.join(map(str, nruns))} per case and pass, {env.get('secs', '?')} s each after a 0.2 s warmup, passes interleaved"),
]
for k, v in meta:
    if v:
        md.append(f"- {k}: {v}")
md.append("")
md.append("ops/s and CPU: median (min-max) over the runs. CPU is the user+system time of the "
          "whole process, io-wq workers included, in percent of one CPU. "
          "change: handoff against baseline, of the medians; `~` marks a change whose "
          "min-max ranges overlap (within the run-to-run spread).")
md.append("")

def table(keys, title):
    if not keys:
        return
    md.append(f"## {title}")
    md.append("")
    md.append("| case | | ops/s | CPU |")
    md.append("|---|---|--:|--:|")
    for key in keys:
        first = True
        rs = {}
        for p in passes:
            r, c = stats(key, p)
            if r is None:
                continue
            rs[p] = (r, c)
            md.append(f"| {case_label(key) if first else ''} | {pass_label(p)} | "
                      f"{cell(r, fmt_rate)} | {cell(c, fmt_pct, '%')} |")
            first = False
        if have_change and "0" in rs and "1" in rs:
            (r0, c0), (r1, c1) = rs["0"], rs["1"]
            rch = fmt_change(r1.mid, r0.mid) + (" ~" if overlap(r0, r1) else "")
            cch = fmt_change(c1.mid, c0.mid) + (" ~" if overlap(c0, c1) else "")
            md.append(f"|  | change | {rch} | {cch} |")
    md.append("")

def is_ref(key):
    return key[0] == "nop" or key[0].startswith("sys-")

table([k for k in order if not is_ref(k)], "io_uring requests")
table([k for k in order if is_ref(k)], "References: IORING_OP_NOP and the synchronous syscall loops")

# QD1 limit: one io_uring round trip (NOP) plus the operation done inline.
def pooled(key):
    vals = [v[0] for vs in groups[key].values() for v in vs]
    return statistics.median(vals)

def paired(key, p):
    """Per round r: the case's rate in pass p over 1/(1/NOP_r + 1/SYS_r), in percent."""
    nk, sk = ("nop", key[1], 1), (f"sys-{key[0]}", key[1], 1)
    out = []
    for rep, vals in by_rep.get(key, {}).items():
        nop = by_rep.get(nk, {}).get(rep)
        sys_ = by_rep.get(sk, {}).get(rep)
        if p in vals and nop and sys_ and all(v > 0 for v in list(nop.values()) + list(sys_.values())):
            lim = 1 / (1 / statistics.median(nop.values()) + 1 / statistics.median(sys_.values()))
            out.append(vals[p] / lim * 100)
    return out

limit_rows = []
for key in order:
    op, fs, qd = key
    if is_ref(key) or qd != 1:
        continue
    nk, sk = ("nop", fs, 1), (f"sys-{op}", fs, 1)
    if nk in groups and sk in groups:
        limit_rows.append((key, pooled(nk), pooled(sk)))
if limit_rows:
    md.append("## QD1 limit")
    md.append("")
    md.append("L = 1/(1/NOP + 1/SYS): the rate at QD 1 if each request cost one io_uring "
              "round trip (IORING_OP_NOP) plus the synchronous syscall, i.e. issued inline "
              "with nothing handed off. NOP and SYS are the medians of all their runs, both "
              "passes pooled (the sysctl does not touch them); % of L is the case's median "
              "against that L. paired: the same ratio taken within each round (repetition), "
              "against the L of that round's NOP and SYS runs, which ran seconds apart from "
              "the case; median (min-max) over the rounds. Under TCG the host's speed drifts "
              "between rounds, so the paired figure is the steadier one.")
    md.append("")
    hdr = "| case | NOP | SYS | L |" + "".join(
        f" {pass_label(p)} | % of L | paired |" for p in passes)
    md.append(hdr)
    md.append("|---|--:|--:|--:|" + "--:|--:|--:|" * len(passes))
    for key, nop, sys_ in limit_rows:
        lim = 1 / (1 / nop + 1 / sys_)
        row = f"| {OP_LABEL.get(key[0], key[0])}, {key[1]} | {fmt_rate(nop)} | {fmt_rate(sys_)} | {fmt_rate(lim)} |"
        for p in passes:
            r, _ = stats(key, p)
            if not r:
                row += " | | |"
                continue
            pr = paired(key, p)
            pcell = cell(Stat(pr), fmt_share, "%") if pr else ""
            row += f" {fmt_rate(r.mid)} | {fmt_share(r.mid / lim * 100)} | {pcell} |"
        md.append(row)
    md.append("")

if errors or bad:
    md.append("## Errors")
    md.append("")
    for e in errors:
        md.append(f"- {e}")
    if bad:
        md.append(f"- {bad} unreadable line(s) in bench.results")
    md.append("")

text = "\n".join(md)
with open(os.path.join(run, "bench.md"), "w") as f:
    f.write(text)
print(text)

# ---------------------------------------------------------------- svg
COLORS = {"base": "#4e79a7", "0": "#4e79a7", "1": "#f28e2b"}
EXTRA = ["#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"]
def color(p):
    if p in COLORS:
        return COLORS[p]
    return EXTRA[[q for q in passes if q not in COLORS].index(p) % len(EXTRA)]

bar_w, gap = 16, 18
group_w = bar_w * len(passes) + gap
left, right, top, plot_h, bottom = 72, 20, 70, 320, 140
width = max(720, left + right + group_w * len(order))
height = top + plot_h + bottom

allv = []
for key in order:
    for p in passes:
        r, _ = stats(key, p)
        if r:
            allv += [r.lo, r.hi]
vmin = max(min(v for v in allv if v > 0) if any(v > 0 for v in allv) else 1, 1e-3)
vmax = max(max(allv), vmin)
lo = 10 ** math.floor(math.log10(vmin))
hi = 10 ** math.ceil(math.log10(vmax))
if hi <= lo:
    hi = lo * 10
def y(v):
    v = max(v, lo)
    return top + plot_h * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

def fmt_axis(v):
    for div, suf in ((1e6, "M"), (1e3, "k"), (1, "")):
        if v >= div:
            return f"{v / div:g}{suf}"
    return f"{v:g}"

def esc(s):
    return html.escape(str(s), quote=True)

svg = []
svg.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">')
svg.append(f'<rect width="{width}" height="{height}" fill="white"/>')
svg.append(f'<text x="{left}" y="22" font-size="15" font-weight="bold">'
           f'io_uring handoff benchmark: ops/s</text>')
sub = " ".join(x for x in (env.get("kernel"), env.get("kconfig") and f"({env['kconfig']} config)") if x)
if env.get("cpus"):
    sub += f", {env['cpus']} vCPUs"
sub = (sub + "; " if sub else "") + "log scale, bar: median, whisker: min-max, label: handoff vs baseline"
svg.append(f'<text x="{left}" y="40" fill="#555">{esc(sub)}</text>')
# legend
lx = left
for p in passes:
    svg.append(f'<rect x="{lx}" y="50" width="12" height="12" fill="{color(p)}"/>')
    svg.append(f'<text x="{lx + 16}" y="60">{esc(pass_label(p))}</text>')
    lx += 24 + 7 * len(pass_label(p)) + 16
# grid: decades and 2x/5x
d = lo
while d <= hi * 1.0001:
    for m in (1, 2, 5):
        v = d * m
        if v > hi * 1.0001:
            break
        yy = y(v)
        major = m == 1
        svg.append(f'<line x1="{left}" x2="{width - right}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   f'stroke="{"#bbb" if major else "#eee"}" stroke-width="1"/>')
        if major or plot_h / max(1, math.log10(hi / lo)) > 120:
            svg.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{esc(fmt_axis(v))}</text>')
    d *= 10
svg.append(f'<text transform="translate(16,{top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">ops/s</text>')
base_y = top + plot_h
for gi, key in enumerate(order):
    gx = left + gi * group_w + gap / 2
    bi = 0
    rs = {}
    for p in passes:
        r, c = stats(key, p)
        x = gx + bi * bar_w
        bi += 1
        if r is None:
            continue
        rs[p] = r
        yy = y(r.mid)
        tip = f"{case_label(key)}, {pass_label(p)}: {cell(r, fmt_rate)} ops/s, CPU {cell(c, fmt_pct, '%')}"
        svg.append(f'<rect x="{x:.1f}" y="{yy:.1f}" width="{bar_w - 2}" height="{base_y - yy:.1f}" '
                   f'fill="{color(p)}"><title>{esc(tip)}</title></rect>')
        if r.n > 1:
            cx = x + (bar_w - 2) / 2
            y1, y2 = y(r.lo), y(r.hi)
            svg.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" stroke="#222"/>')
            for yc in (y1, y2):
                svg.append(f'<line x1="{cx - 3:.1f}" x2="{cx + 3:.1f}" y1="{yc:.1f}" y2="{yc:.1f}" stroke="#222"/>')
    if "0" in rs and "1" in rs:
        ty = min(y(rs["0"].hi), y(rs["1"].hi)) - 5
        svg.append(f'<text x="{gx + bar_w * len(passes) / 2:.1f}" y="{ty:.1f}" text-anchor="middle" '
                   f'font-size="10">{esc(fmt_change(rs["1"].mid, rs["0"].mid))}</text>')
    lxx = gx + bar_w * len(passes) / 2
    svg.append(f'<text transform="translate({lxx:.1f},{base_y + 12}) rotate(-45)" text-anchor="end">'
               f'{esc(short_label(key))}</text>')
svg.append(f'<line x1="{left}" x2="{width - right}" y1="{base_y}" y2="{base_y}" stroke="#333"/>')
svg.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{base_y}" stroke="#333"/>')
svg.append("</svg>")
with open(os.path.join(run, "bench.svg"), "w") as f:
    f.write("\n".join(svg) + "\n")
sys.exit(0)
PY
