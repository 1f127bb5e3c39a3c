#!/usr/bin/env python3
# Turn $RUN/beyond.results (lines "rep=N bench=<kind> key=value ...") into
# the markdown report of 'make bench-beyond', on stdout. Each figure is the
# median over the repetitions, with the range in brackets.
import os
import statistics
import sys
from collections import OrderedDict, defaultdict

run = sys.argv[1]


def kv(line):
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


env = {}
try:
    with open(f"{run}/beyond.env") as f:
        env = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
except OSError:
    pass

rows = []
with open(f"{run}/beyond.results") as f:
    rows = [kv(l) for l in f if "bench=" in l]


def group(kind, keys):
    g = OrderedDict()
    for r in rows:
        if r.get("bench") == kind:
            g.setdefault(tuple(r.get(k, "") for k in keys), []).append(r)
    return g


def num(rs, field):
    vals = []
    for r in rs:
        try:
            vals.append(float(r[field]))
        except (KeyError, ValueError):
            pass
    return vals


def fmt(v):
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def med(rs, field):
    vals = num(rs, field)
    if not vals:
        return "-"
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt(m)
    return f"{fmt(m)} ({fmt(min(vals))}-{fmt(max(vals))})"


def medv(rs, field):
    vals = num(rs, field)
    return statistics.median(vals) if vals else None


def change(new, old):
    if new is None or old is None or old == 0:
        return "-"
    return f"{(new / old - 1) * 100:+.0f}%"


try:
    with open(os.path.join(run, "accel")) as f:
        accel = f.read().strip().upper() or "TCG"
except OSError:
    accel = "TCG"

out = []
p = out.append
p("# bench-beyond")
p("")
p(f"Kernel `{env.get('kernel', '?')}` ({env.get('build', '?')}), config "
  f"`{env.get('kconfig', '?')}`, {env.get('cpus', '?')} vCPUs under {accel}, "
  f"{int(env.get('mem_kb', '0')) // 1024} MB. Median of {env.get('reps', '?')} "
  "runs, range in brackets. Figures, not pass/fail.")

g = group("flood", ["qd"])
if g:
    p("")
    p("## io-wq flood: IORING_OP_NOP with IOSQE_ASYNC")
    p("")
    p(f"Every NOP goes through io-wq; {env.get('secs', '?')} s per run. CPU is the "
      "whole process (io-wq workers included), in % of one CPU.")
    p("")
    p("| QD | NOPs/s | CPU % | CPU us per NOP |")
    p("| ---: | ---: | ---: | ---: |")
    for (qd,), rs in g.items():
        p(f"| {qd} | {med(rs, 'ops_s')} | {med(rs, 'cpu_pct')} | {med(rs, 'cpu_us_op')} |")

g = group("epoll", ["fds", "producer", "mode"])
if g:
    p("")
    p("## epoll: epoll_wait(2) vs IORING_OP_EPOLL_WAIT")
    p("")
    p("A round makes FDS edge-triggered eventfds ready, waits until all are "
      "reported, and reads them. Producer `self`: the waiter makes them ready before "
      "it waits; `thread`: another thread does, once the waiter waits (for `single`, "
      "once its request is submitted), so every wait blocks. `single`: one IORING_OP_EPOLL_WAIT submitted per "
      "wait; `multi`: one multishot request armed for the whole run, each batch "
      "in a provided buffer. The io_uring modes use a ring with "
      "IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, as an event loop would. "
      "Change is against epoll_wait(2).")
    p("")
    p("| FDS | producer | mode | rounds/s | events/s | CPU % | waits/round | change |")
    p("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (fds, prod, mode), rs in g.items():
        bad = [r for r in rs if "unsupported" in r]
        if bad:
            p(f"| {fds} | {prod} | {mode} | refused by this kernel: {bad[0]['unsupported']} "
              "| | | | |")
            continue
        base = medv(g.get((fds, prod, "sys"), []), "events_s")
        p(f"| {fds} | {prod} | {mode} | {med(rs, 'rounds_s')} | {med(rs, 'events_s')} | "
          f"{med(rs, 'cpu_pct')} | {med(rs, 'waits_round')} | "
          f"{'' if mode == 'sys' else change(medv(rs, 'events_s'), base)} |")

g = group("napi", ["waker"])
if g:
    p("")
    p("## NAPI busy poll (napi_test: veth with GRO, busy_poll_to = wait = 10 ms)")
    p("")
    p("Busy time is the waiting thread's CPU time per 10 ms wait; polls/s counts "
      "napi_poll events during the busy time (-1: not counted).")
    p("")
    p("| waker | busy ms per wait | wall ms per wait | NAPI polls/s |")
    p("| --- | ---: | ---: | ---: |")
    for (w,), rs in g.items():
        label = {"none": "none", "fifo_1ms": "SCHED_FIFO every 1 ms"}.get(w, w)
        p(f"| {label} | {med(rs, 'busy_ms_wait')} | {med(rs, 'wall_ms_wait')} | {med(rs, 'polls_s')} |")

g = group("bdev", ["op", "mode"])
if g:
    p("")
    p("## Buffered I/O on a block device: normal vs RWF_DONTCACHE")
    p("")
    any_r = next(iter(g.values()))[0]
    p(f"IORING_OP_READ/WRITE on /dev/vda (virtio, raw, host file), {any_r.get('bs_kb')} KiB "
      f"blocks, QD {any_r.get('qd')}, sequential over {any_r.get('span_mb')} MB, in a memory "
      f"cgroup of {env.get('memcg_mb', '?')} MB; writes end with fdatasync. Cached MB: the "
      "cgroup's page cache at the end of a run. Per second: the median run's MB/s in "
      "each second.")
    p("")
    p("| op | mode | MB/s | cached MB | per second (MB/s) | change |")
    p("| --- | --- | ---: | ---: | --- | ---: |")
    for (op, mode), rs in g.items():
        m = medv(rs, "mbs")
        mrun = min(rs, key=lambda r: abs(float(r.get("mbs", 0)) - (m or 0)))
        per = mrun.get("per_sec", "").replace(",", " ")
        base = medv(g.get((op, "normal"), []), "mbs")
        p(f"| {op} | {mode} | {med(rs, 'mbs')} | {med(rs, 'cached_mb')} | {per} | "
          f"{'' if mode == 'normal' else change(m, base)} |")

errors = f"{run}/beyond.errors"
try:
    with open(errors) as f:
        errs = [l.rstrip() for l in f if l.strip()]
except OSError:
    errs = []
p("")
p(f"{len(rows)} results, {len(errs)} failed runs.")
for e in errs[:10]:
    p(f"- {e}")
print("\n".join(out))
