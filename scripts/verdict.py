#!/usr/bin/env python3
"""The verdict of a 'make test' run, and the console checks of vm.sh.

  verdict.py summary RUN VM_RC   print the summary of a run folder; exit 1 on
                                 any failure, 0 when everything held
  verdict.py race CONSOLE        exit 0 when the console's crash is the TCG
                                 text-patching race (the one crash vm.sh runs
                                 again), 1 otherwise; prints why
  verdict.py splats CONSOLE...   print the kernel splats of the consoles
  verdict.py selftest            check the race rule on tests/verdict/*.console

What is expected comes from the repo: tests/expected.txt (kselftest programs
and their case counts, KUnit suites, allowed skips), tests/console-allow.txt
(named console allowances) and tests/liburing-baseline.txt.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECTED = os.path.join(REPO, 'tests', 'expected.txt')
ALLOW = os.path.join(REPO, 'tests', 'console-allow.txt')
# the guest's architecture (scripts/lib.sh ARCH): arm64 has a baseline of its own
ARCH = os.environ.get('IOU_ARCH', 'x86_64')
BASELINE_NAME = 'liburing-baseline.txt' if ARCH == 'x86_64' else 'liburing-baseline-%s.txt' % ARCH
BASELINE = os.path.join(REPO, 'tests', BASELINE_NAME)

# --- the console ------------------------------------------------------------------

TS = re.compile(r'^\[\s*\d+\.\d+\]\s?')


def read_text(path):
    """A file of a run as text, whatever bytes it holds. NULs are dropped:
    one may split a word of a report ("WARN\0ING")."""
    with open(path, 'rb') as f:
        return f.read().replace(b'\0', b'').decode('utf-8', 'replace')


def read_console(path):
    """Lines of a console log, without their CRs."""
    return [l.rstrip('\r') for l in read_text(path).split('\n')]


# A kernel report, by the first line it prints. Each name is printed in the
# summary, so the cause of a red run is named.
SPLATS = [
    ('warning', r'WARNING:|-{12}\[ cut here \]-{12}'),
    ('stack protector', r'stack-protector: Kernel stack is corrupted'),
    ('bug', r'BUG:|kernel BUG at'),
    ('slub', r'BUG [\w.:-]+ \((Not tainted|Tainted:[^)]*)\)'),
    ('oops', r'Oops|general protection fault|Unable to handle kernel'),
    ('panic', r'Kernel panic'),
    ('lockdep', r'possible circular locking|possible recursive locking|'
                r'inconsistent lock state|DEBUG_LOCKS_WARN_ON|'
                r'turning off the locking correctness validator|'
                r'possible irq lock inversion|bad unlock balance|'
                r'held lock freed|lock held when returning to user space'),
    ('rcu', r'suspicious RCU usage|rcu: INFO|rcu_\w+ (self-)?detected stall|'
            r'rcu_\w+ kthread starved'),
    ('hung task', r'INFO: task .* blocked for more than'),
    ('lockup', r'soft lockup|hard LOCKUP'),
    ('ubsan', r'UBSAN:'),
    ('kasan', r'KASAN:|KFENCE:'),
    ('kmemleak', r'kmemleak: \d+ new suspected memory leaks|unreferenced object 0x'),
    ('atomic sleep', r'scheduling while atomic|'
                     r'sleeping function called from invalid context'),
    ('list corruption', r'list_add corruption|list_del corruption'),
    ('refcount', r'refcount_t:'),
    ('oom', r'invoked oom-killer|Out of memory|oom-kill:|Killed process \d+'),
    ('call trace', r'Call Trace:'),
    ('printk dropped', r'\*\* \d+ printk messages dropped \*\*'),
    ('fs error', r'EXT4-fs error|EXT4-fs warning|Buffer I/O error|I/O error, dev '),
]
# kinds an 'Oops: int3' report of the TCG race is made of; inside its block
# any other kind is still a failure
RACE_KINDS = {'oops', 'panic', 'call trace'}
SPLAT_RE = [(n, re.compile(p)) for n, p in SPLATS]
# the marker lines the guest writes to /dev/kmsg ("iou-test: liburing x.t")
MARKER = re.compile(r'^iou-test: (kselftests handoff=\S+|liburing \S+ handoff=\S+|inject \S+|done)$')
DONE = re.compile(r'\[\s*\d+\.\d+\]\s?iou-test: done\b')


def load_allowances():
    """(name, regex) pairs of tests/console-allow.txt: "name<TAB>regex"."""
    out = []
    if not os.path.exists(ALLOW):
        return out
    with open(ALLOW) as f:
        for line in f:
            line = line.rstrip('\n')
            if not line.strip() or line.startswith('#'):
                continue
            name, tab, rx = line.partition('\t')
            if not tab or not name.strip() or not rx.strip():
                raise SystemExit('%s: expected NAME<TAB>REGEX: %s' % (ALLOW, line))
            out.append((name.strip(), re.compile(rx.strip())))
    return out


def splat_kind(line):
    """The kind of kernel report a console line (timestamp stripped) starts, or None."""
    return next((n for n, rx in SPLAT_RE if rx.search(line)), None)


def race_block(lines):
    """(first, last, why) of the 'Oops: int3' report when it is the TCG race.

    Multi-threaded TCG can run a stale translation of a site the kernel
    live-patched with int3 (text_poke_bp) after the patch completed and its
    int3 handler was removed. The trap then reports an int3 at an address
    where memory no longer holds one: in the report's Code: line the byte
    before the <marked> byte (regs->ip points after the int3) is not cc. A
    real int3 (padding, a BUG-style trap) shows cc there and is a crash.
    Returns (None, None, why) when the console has no such report.
    """
    for i, l in enumerate(lines):
        s = TS.sub('', l)
        if not s.startswith('Oops: int3'):
            continue
        # the report runs to '---[ end trace' and, after a fatal exception,
        # on through the register summary to '---[ end Kernel panic'
        last, code, rip, end, panic_end = i, None, None, None, False
        for j in range(i + 1, min(len(lines), i + 200)):
            t = TS.sub('', lines[j])
            if t.startswith('Code:') and code is None:
                code = t
            if t.startswith('RIP: ') and rip is None:
                rip = t
            if t.startswith('---[ end Kernel panic'):
                last, panic_end = j, True
                break
            if t.startswith('---[ end trace') and end is None:
                end = j
            if end is not None and j > end + 40:
                break
            last = j
        if end is not None and not panic_end:
            last = end
        if code is None or rip is None or not rip.startswith('RIP: 0010:'):
            return None, None, 'Oops: int3 without a kernel RIP and Code: line: a crash'
        toks = code.split()[1:]
        idx = [k for k, t in enumerate(toks) if t.startswith('<')]
        if not idx or idx[0] == 0:
            return None, None, 'Oops: int3 whose Code: line has no marked byte: a crash'
        before = toks[idx[0] - 1].lower()
        if before == 'cc':
            return None, None, ('Oops: int3 at %s on a real int3 in memory (cc before the '
                                'trap address): a crash, not the TCG race' % rip[10:])
        last = race_tail(lines, last, rip, code)
        return i, last, ('Oops: int3 at %s, memory holds %s there (stale TCG translation '
                         'of patched text)' % (rip[10:], before))
    return None, None, 'no Oops: int3 on the console'


def race_tail(lines, last, rip, code):
    """The last line of what follows a race report at @last and is still the race.

    The stale translation stays until the block is translated again, so the
    trap can hit a second time while the first report is printed (printk's
    clock runs the same code): a second 'Oops: int3' follows, with the first
    report's registers replayed, and the panic of an oops in an interrupt.
    That continuation is part of the race as long as every RIP: and Code:
    line in it is the first report's and it holds no other report: any other
    Oops, trap address or kind of report ends it, and is judged on its own.
    """
    end, before_oops = last, last
    for j in range(last + 1, min(len(lines), last + 80)):
        t = TS.sub('', lines[j])
        if (t.startswith('RIP: ') and t != rip) or (t.startswith('Code:') and t != code):
            # a second report at another address: not the race, from its header on
            return before_oops
        kind = splat_kind(t)
        if kind is not None and kind not in RACE_KINDS:
            break
        # an oops (a general protection fault too) that is not a second int3
        if kind == 'oops' and not t.startswith('Oops: int3'):
            break
        if kind == 'oops':
            before_oops = end
        end = j
        if t.startswith('---[ end Kernel panic'):
            break
    return end


def splats(lines, allow_race=False):
    """[(name, line)] of the kernel reports on a console."""
    skip = set()
    if allow_race:
        a, b, _ = race_block(lines)
        if a is not None:
            skip = set(range(a, b + 1))
    def allowed_here(i, name):
        return i in skip and name in RACE_KINDS
    allow = load_allowances()
    out = []
    for i, l in enumerate(lines):
        s = TS.sub('', l)
        if MARKER.match(s):
            continue
        name = splat_kind(s)
        if name is None or allowed_here(i, name) or any(arx.search(s) for _, arx in allow):
            continue
        out.append((name, l.strip()))
    return out


# --- expectations -------------------------------------------------------------------

class Expected:
    """tests/expected.txt: 'kselftest COLL:PROG CASES', 'kunit SUITE',
    'skip COLL:PROG CASE REASON', 'liburing-skip TEST REASON',
    'liburing-flaky TEST REASON', 'liburing-timeout TEST SECONDS REASON',
    'liburing-no-alarm TEST REASON', 'liburing-timing TEST "PATTERN" REASON'."""

    def __init__(self):
        self.kselftests, self.kunit, self.skips = {}, [], {}
        self.liburing_skips, self.flaky, self.timeouts = {}, {}, {}
        self.no_alarm = {}
        # TEST -> (PATTERN, REASON): a failure whose output matches PATTERN (an
        # extended regular expression) is a failed wall-clock check, not a bug
        self.timing = {}


TIMING = re.compile(r'^liburing-timing (\S+) "([^"]+)" (\S.*?)\s*$')


def load_expected():
    e = Expected()
    with open(EXPECTED) as f:
        for n, line in enumerate(f, 1):
            w = line.split()
            if not w or w[0].startswith('#'):
                continue
            # KIND@ARCH: an entry for that guest architecture only, which
            # replaces the plain entry for the same program or case
            if '@' in w[0]:
                kind, _, arch = w[0].partition('@')
                if arch not in ('x86_64', 'arm64'):
                    raise SystemExit('%s:%d: unknown architecture %r' % (EXPECTED, n, arch))
                if arch != ARCH:
                    continue
                w[0] = kind
                line = line.replace(kind + '@' + arch, kind, 1)
            if w[0] == 'kselftest' and len(w) == 3:
                e.kselftests[w[1]] = int(w[2])
            elif w[0] == 'kunit' and len(w) == 2:
                e.kunit.append(w[1])
            elif w[0] == 'skip' and len(w) >= 4:
                e.skips[(w[1], w[2])] = ' '.join(w[3:])
            elif w[0] == 'liburing-skip' and len(w) >= 3:
                e.liburing_skips[w[1]] = ' '.join(w[2:])
            elif w[0] == 'liburing-flaky' and len(w) >= 3:
                e.flaky[w[1]] = ' '.join(w[2:])
            elif w[0] == 'liburing-timeout' and len(w) >= 4 and re.fullmatch(r'[1-9]\d*', w[2]):
                e.timeouts[w[1]] = (int(w[2]), ' '.join(w[3:]))
            elif w[0] == 'liburing-no-alarm' and len(w) >= 3:
                e.no_alarm[w[1]] = ' '.join(w[2:])
            elif w[0] == 'liburing-timing' and TIMING.match(line):
                m = TIMING.match(line)
                # the guest matches it with grep -E: 2 is a bad expression
                if subprocess.run(['grep', '-Eq', '--', m.group(2)], input=b'',
                                  stderr=subprocess.PIPE).returncode == 2:
                    raise SystemExit('%s:%d: not an extended regular expression: %s'
                                     % (EXPECTED, n, m.group(2)))
                e.timing[m.group(1)] = (m.group(2), m.group(3))
            else:
                raise SystemExit('%s:%d: cannot parse: %s' % (EXPECTED, n, line.strip()))
    return e


def load_baseline():
    base = {}
    if not os.path.exists(BASELINE):
        return None
    with open(BASELINE) as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and not w[0].startswith('#'):
                base[w[0]] = w[1]
    return base


def regressed(st, bst):
    """A failure or timeout where the base passed or skipped."""
    return st in ('fail', 'timeout') and bst in ('pass', 'skip')


# --- the parts of a run ---------------------------------------------------------------

def phases_asked():
    """PHASES as the guest reads it: unset or empty means both."""
    w = (os.environ.get('PHASES') or '').split() or ['kselftest', 'liburing']
    bad = [x for x in w if x not in ('kselftest', 'liburing')]
    if bad:
        raise SystemExit('PHASES: unknown phase(s) %s (kselftest, liburing)' % ' '.join(bad))
    return w


class Verdict:
    def __init__(self):
        self.failures = []
        self.passed = 0
        self.skipped = 0

    def bad(self, msg):
        self.failures.append(msg)
        print('  FAIL: ' + msg)


CASE = re.compile(r'^# (not ok|ok) (\d+)(?: ([^#]*?))?\s*(?:#\s*(\w+)\b(.*))?$')
PROG_END = re.compile(r'^(not ok|ok) \d+ selftests: (\S+): (\S+)(.*)$')
PROG_HDR = re.compile(r'^# selftests: (\S+): (\S+)\s*$')


def parse_ksft(path):
    """Programs of a run_kselftest.sh TAP file, its exit status and its defects.

    {COLL:PROG: {'status', 'directive', 'cases': [(name, result, text)],
    'plan'}}, exit status (None if not recorded), [problems]
    """
    progs, cur, exit_rc, problems, top_plan, nprog = {}, None, None, [], None, 0
    for line in read_text(path).splitlines():
        line = line.rstrip('\r')
        m = PROG_HDR.match(line)
        if m:
            key = '%s:%s' % m.groups()
            if key in progs:
                problems.append('%s reported twice' % key)
            cur = {'cases': [], 'status': None, 'directive': '', 'plan': None, 'nums': []}
            progs[key] = cur
            continue
        m = PROG_END.match(line)
        if m:
            key = '%s:%s' % (m.group(2), m.group(3))
            p = progs.setdefault(key, {'cases': [], 'plan': None, 'nums': []})
            p['status'], p['directive'] = m.group(1), m.group(4).strip()
            nprog += 1
            cur = None
            continue
        m = re.match(r'^1\.\.(\d+)$', line)
        if m and cur is None:
            top_plan = int(m.group(1))
            continue
        if re.match(r'^(# )*Bail out!', line):
            problems.append('bail out: %s' % line)
            continue
        m = re.match(r'^# exit=(\d+)$', line)
        if m and cur is None:
            exit_rc = int(m.group(1))
            continue
        if cur is None:
            continue
        m = re.match(r'^# 1\.\.(\d+)$', line)
        if m:
            cur['plan'] = int(m.group(1))
            continue
        m = CASE.match(line)
        if m:
            res, num, name, directive, rest = m.groups()
            directive = (directive or '').upper()
            if res == 'not ok':
                r = 'fail'
            elif directive == 'SKIP':
                r = 'skip'
            elif directive in ('XFAIL', 'XPASS', 'TODO'):
                r = 'fail'
            else:
                r = 'pass'
            cur['cases'].append(((name or '').strip() or '#%s' % num, r,
                                 ('%s %s' % (directive, rest or '')).strip()))
            cur['nums'].append(int(num))
    if top_plan is not None and top_plan != nprog:
        problems.append('planned %d program(s), %d reported' % (top_plan, nprog))
    for key, p in progs.items():
        names = [c[0] for c in p['cases']]
        if len(set(names)) != len(names):
            problems.append('%s reports a case twice' % key)
        if p['nums'] != list(range(1, len(p['nums']) + 1)):
            problems.append('%s numbers its cases out of sequence' % key)
    return progs, exit_rc, problems


def check_kselftests(v, run, passes, expected, skips):
    phases = phases_asked()
    if 'kselftest' not in phases:
        print('kselftest:  not asked for (PHASES=%s)' % phases)
        return
    nexp = sum(expected.values())
    for p in passes:
        path = os.path.join(run, 'kselftest.%s.tap' % p)
        if not os.path.exists(path):
            print('kselftest:  handoff=%s: no results' % p)
            v.bad('kselftests did not run (handoff=%s): %s missing' % (p, os.path.basename(path)))
            continue
        progs, rc, problems = parse_ksft(path)
        for pr in problems:
            v.bad('kselftests (handoff=%s): %s' % (p, pr))
        seen_cases = sum(len(x['cases']) for x in progs.values())
        cnt = {'pass': 0, 'fail': 0, 'skip': 0}
        for x in progs.values():
            for _, r, _ in x['cases']:
                cnt[r] += 1
        v.passed += cnt['pass']
        v.skipped += cnt['skip']
        print('kselftest:  handoff=%s: programs expected %d, seen %d; cases expected %d, seen %d:'
              ' passed %d, failed %d, skipped %d' % (p, len(expected), len(progs), nexp,
                                                     seen_cases, cnt['pass'], cnt['fail'],
                                                     cnt['skip']))
        if rc is None:
            v.bad('kselftests (handoff=%s): run_kselftest.sh exit status not recorded' % p)
        elif rc != 0:
            v.bad('kselftests (handoff=%s): run_kselftest.sh exited %d' % (p, rc))
        for prog, ncases in sorted(expected.items()):
            x = progs.get(prog)
            if x is None:
                v.bad('kselftest %s did not run (handoff=%s)' % (prog, p))
                continue
            if x['status'] is None:
                v.bad('kselftest %s did not finish (handoff=%s)' % (prog, p))
            elif x['status'] != 'ok':
                v.bad('kselftest %s failed (handoff=%s) %s' % (prog, p, x['directive']))
            elif 'SKIP' in x['directive'].upper():
                v.bad('kselftest %s skipped as a whole (handoff=%s)' % (prog, p))
            if len(x['cases']) != ncases:
                v.bad('kselftest %s ran %d case(s), expected %d (handoff=%s; a new case '
                      'is added to tests/expected.txt)' % (prog, len(x['cases']), ncases, p))
            if x['plan'] is not None and x['plan'] != len(x['cases']):
                v.bad('kselftest %s planned %d case(s) and reported %d (handoff=%s)'
                      % (prog, x['plan'], len(x['cases']), p))
            for name, r, rest in x['cases']:
                if r == 'fail':
                    v.bad('kselftest %s: %s failed (handoff=%s) %s' % (prog, name, p, rest))
                elif r == 'skip':
                    why = skips.get((prog, name))
                    if why:
                        print('            allowed skip: %s %s (%s)' % (prog, name, why))
                    else:
                        v.bad('kselftest %s: %s skipped (handoff=%s): %s'
                              % (prog, name, p, rest[4:].strip() or 'no reason'))
        for prog in sorted(set(progs) - set(expected)):
            v.bad('kselftest %s ran but is not in tests/expected.txt (handoff=%s)' % (prog, p))


def check_kunit(v, run, lines, expected):
    con = os.path.join(run, 'console.log')
    if not any('KTAP version' in l for l in lines):
        print('KUnit:      no KTAP output on the console')
        v.bad('no KUnit results on the console')
        return
    work = os.environ.get('WORK', '')
    kunit = os.path.join(work, 'tools', 'testing', 'kunit', 'kunit.py')
    with tempfile.TemporaryDirectory() as td:
        clean = os.path.join(td, 'console.txt')
        with open(clean, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        js = os.path.join(td, 'kunit.json')
        r = subprocess.run([sys.executable, kunit, 'parse', '--json=' + js, clean],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not os.path.exists(js):
            print('KUnit:      unparsed')
            print('\n'.join(r.stdout.splitlines()[-10:]))
            v.bad('KUnit results could not be parsed from %s' % con)
            return
        with open(js) as f:
            root = json.load(f)
    suites = {}

    def walk(g, top):
        for sg in g.get('sub_groups', []):
            if top:
                suites[sg['name']] = sg
            walk(sg, False)

    walk(root, True)
    m = root.get('misc', {})
    v.passed += m.get('passed', 0)
    v.skipped += m.get('skipped', 0)
    print('KUnit:      suites expected %d (of the series), seen %d; cases %d: passed %d, '
          'failed %d, crashed %d, skipped %d' % (len(expected), len(suites), m.get('tests', 0),
                                                  m.get('passed', 0), m.get('failed', 0),
                                                  m.get('crashed', 0), m.get('skipped', 0)))
    if r.returncode != 0 or m.get('failed', 0) or m.get('crashed', 0) or m.get('errors', 0):
        for l in r.stdout.splitlines():
            if re.search(r'\[FAILED\]|CRASHED|\[ERROR\]', l):
                print('            ' + l.strip())
        v.bad('KUnit failures (kunit.py parse exit %d)' % r.returncode)
    for s in expected:
        g = suites.get(s)
        if g is None:
            v.bad('KUnit suite %s did not run' % s)
            continue
        c = g.get('misc', {})
        ran = c.get('tests', 0) - c.get('skipped', 0)
        print('            %s: %d case(s), %d passed, %d skipped'
              % (s, c.get('tests', 0), c.get('passed', 0), c.get('skipped', 0)))
        if ran <= 0:
            v.bad('KUnit suite %s ran no case (all %d skipped)' % (s, c.get('tests', 0)))


def check_liburing(v, run, passes, base, allowed_skips, flaky, timeouts, no_alarm, timing):
    phases = phases_asked()
    if 'liburing' not in phases:
        print('liburing:   not asked for (PHASES=%s)' % phases)
        return
    if timeouts:
        print('liburing:   own timeouts (tests/expected.txt): %s' % ', '.join(
            '%s %d s' % (t, s) for t, (s, _) in sorted(timeouts.items())))
    if no_alarm:
        print('liburing:   alarm() watchdog off, the timeout kept (tests/expected.txt): %s' % ' '.join(
            sorted(no_alarm)))
    if timing:
        print('liburing:   timing checks TCG cannot meet, run up to %s times (tests/expected.txt): %s'
              % (os.environ.get('LIBURING_FLAKY_RUNS', '3'), ' '.join(sorted(timing))))
    if base is None:
        v.bad('no liburing baseline for %s (%s): record it with make baseline ARCH=%s'
              % (ARCH, os.path.basename(BASELINE), ARCH))
        return
    subset = os.environ.get('LIBURING_TESTS', '').split()
    want = subset or sorted(base)
    for p in passes:
        path = os.path.join(run, 'liburing.%s.results' % p)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            print('liburing:   handoff=%s: no results' % p)
            v.bad('liburing did not run (handoff=%s): %s missing or empty'
                  % (p, os.path.basename(path)))
            continue
        res, runs = {}, {}
        for n, line in enumerate(read_text(path).splitlines(), 1):
            w = line.split()
            if not w:
                continue
            r = [re.fullmatch(r'runs=(\d+)', x) for x in w[2:] if x.startswith('runs=')]
            if len(w) < 2 or w[1] not in ('pass', 'fail', 'skip', 'timeout', 'timing') or \
                    (r and not r[0]):
                v.bad('liburing (handoff=%s): %s line %d malformed: %s'
                      % (p, os.path.basename(path), n, line.strip()))
                continue
            if w[0] in res:
                v.bad('liburing (handoff=%s): %s reported twice' % (p, w[0]))
            res[w[0]] = w[1]
            runs[w[0]] = int(r[0].group(1)) if r else 1
            if runs[w[0]] > 1 and w[0] not in flaky and w[0] not in timing:
                v.bad('liburing (handoff=%s): %s ran %d times but is not listed as flaky'
                      % (p, w[0], runs[w[0]]))
        c = {k: sum(1 for s in res.values() if s == k)
             for k in ('pass', 'fail', 'skip', 'timeout', 'timing')}
        v.passed += c['pass']
        # a test that failed its timing check in every run proved nothing
        # (its later checks may not even have run): counted as skipped
        v.skipped += c['skip'] + c['timing']
        print('liburing:   handoff=%s: expected %d, ran %d: passed %d, failed %d, skipped %d, '
              'timed out %d, timing check only %d' % (p, len(want), len(res), c['pass'], c['fail'],
                                                      c['skip'], c['timeout'], c['timing']))
        missing = [t for t in want if t not in res]
        if missing:
            v.bad('liburing (handoff=%s): %d test(s) did not run: %s'
                  % (p, len(missing), ' '.join(missing[:20]) + (' ...' if len(missing) > 20 else '')))
        known, regress, newskip, newfail, okskip = [], [], [], [], []
        for t, st in sorted(res.items()):
            bst = base.get(t)
            if bst is None:
                if st != 'pass':
                    newfail.append('%s:%s' % (t, st))
                continue
            if st == 'pass':
                if runs.get(t, 1) > 1:
                    why = ('flaky: %s' % flaky[t]) if t in flaky else \
                        ('timing: %s' % timing.get(t, ('', '?'))[1])
                    okskip.append('%s passed on run %d (%s)' % (t, runs[t], why))
                continue
            if st == 'timing':
                if t in timing:
                    okskip.append('%s: only its timing check failed, %d run(s) (%s)'
                                  % (t, runs.get(t, 1), timing[t][1]))
                else:
                    v.bad('liburing (handoff=%s): %s reported "timing" but is not listed as '
                          'liburing-timing' % (p, t))
                continue
            if runs.get(t, 1) > 1 and st == 'skip' and bst == 'skip' and t in flaky:
                # a flaky test that skips on the base: its last run reached
                # the base's result, which is as far as it can get here
                okskip.append('%s skipped on run %d, as on the base (flaky: %s)'
                              % (t, runs[t], flaky[t]))
                continue
            if runs.get(t, 1) > 1:
                # a flaky test that failed and then did not pass
                regress.append('%s:%s after a failed run' % (t, st))
                continue
            if st == 'skip':
                if bst == 'skip':
                    continue
                if t in allowed_skips:
                    okskip.append('%s skipped (%s)' % (t, allowed_skips[t]))
                elif bst == 'pass':
                    newskip.append(t)
                continue
            if regressed(st, bst):
                # worse than on the base: a skip there that fails here too
                regress.append('%s:%s%s' % (t, st, '' if bst == 'pass' else '(base:skip)'))
            else:
                known.append('%s:%s(base:%s)' % (t, st, bst))
        print('            known failures on base: %d %s' % (len(known), ' '.join(known)))
        print('            skipped: %s' % ' '.join(t for t, s in sorted(res.items()) if s == 'skip'))
        for s in okskip:
            print('            allowed: ' + s)
        if regress:
            v.bad('liburing regressions against the base (handoff=%s): %s' % (p, ' '.join(regress)))
            for t in regress:
                out = os.path.join(run, 'liburing.%s.out' % p, t.split(':')[0] + '.txt')
                if os.path.exists(out):
                    for l in read_text(out).splitlines()[-5:]:
                        print('            | ' + l)
        if newskip:
            v.bad('liburing (handoff=%s): pass on the base, skipped here: %s'
                  % (p, ' '.join(newskip)))
        if newfail:
            v.bad('liburing (handoff=%s): not in the baseline and not passing: %s'
                  % (p, ' '.join(newfail)))


def use_run_snapshot(run):
    """Judge by the expectations and parameters the run was started with."""
    global EXPECTED, ALLOW, BASELINE
    snap = os.path.join(run, 'repo', 'tests')
    if os.path.isdir(snap):
        EXPECTED = os.path.join(snap, 'expected.txt')
        ALLOW = os.path.join(snap, 'console-allow.txt')
        BASELINE = os.path.join(snap, BASELINE_NAME)
    params = os.path.join(run, 'params')
    if os.path.exists(params):
        for line in read_text(params).splitlines():
            k, eq, val = line.partition('=')
            if eq and k in ('PHASES', 'LIBURING_TESTS', 'HANDOFF_PASSES', 'INJECT'):
                os.environ[k] = val


def summary(run, vmrc):
    if not os.path.isdir(run):
        print('no run folder %s' % run)
        return 1
    use_run_snapshot(run)
    v = Verdict()
    print()
    print('===================== SUMMARY (%s) =====================' % run)
    base_kernel = os.environ.get('IOU_KERNEL') == 'base'
    if vmrc == '124':
        v.bad('guest hung (no completion before the timeout)')
    elif vmrc != '0':
        v.bad('guest command exited with status %s' % vmrc)

    con = os.path.join(run, 'console.log')
    lines = read_console(con) if os.path.exists(con) else []
    if not lines:
        v.bad('no console log (%s)' % con)

    # which handoff passes ran, and which were due
    passes_file = os.path.join(run, 'passes')
    ran = read_text(passes_file).split() if os.path.exists(passes_file) else []
    sysfail = os.path.join(run, 'sysctl-failed')
    if os.path.exists(sysfail):
        v.bad('the guest could not set kernel.io_uring_handoff: %s' % read_text(sysfail).strip())
    if base_kernel:
        want = ['base']
    else:
        want = (os.environ.get('HANDOFF_PASSES') or '1 0').split()
        if ran == ['base']:
            v.bad('kernel.io_uring_handoff is missing on a kernel built with the series')
        elif vmrc == '0' and sorted(ran) != sorted(want):
            v.bad('handoff passes due %s, the guest ran %s' % (' '.join(want), ' '.join(ran) or 'none'))
    ver = os.path.join(run, 'repo', 'version')
    print('run of:     %s%s' % (read_text(ver).strip() if os.path.exists(ver) else 'unknown',
                                ('; INJECT=' + os.environ['INJECT']) if os.environ.get('INJECT') else ''))
    acc = os.path.join(run, 'accel')
    print('kernel:     %s, %s under %s; handoff passes due: %s; run: %s'
          % ('base (no series)' if base_kernel else 'series', ARCH,
             read_text(acc).strip().upper() if os.path.exists(acc) else '?',
             ' '.join(want), ' '.join(ran) or 'none'))

    exp = load_expected()
    base = load_baseline()
    if lines:
        check_kunit(v, run, lines, [] if base_kernel else exp.kunit)
    if not base_kernel:
        check_kselftests(v, run, want, exp.kselftests, exp.skips)
    check_liburing(v, run, want, base, exp.liburing_skips, exp.flaky, exp.timeouts, exp.no_alarm,
                   exp.timing)

    # the consoles: this run's, and those of every run vm.sh retried
    consoles = [con] + sorted(os.path.join(run, f) for f in os.listdir(run)
                              if re.match(r'console\.(crashed|boot-failed)-\d+\.log$', f))
    nsplat = 0
    for c in consoles:
        if not os.path.exists(c):
            continue
        retried = c != con
        got = splats(read_console(c), allow_race=retried)
        nsplat += len(got)
        if got:
            kinds = sorted(set(n for n, _ in got))
            print('dmesg:      %s: %d report line(s) (%s)' % (os.path.basename(c), len(got),
                                                             ', '.join(kinds)))
            for _, l in got[:20]:
                print('            ' + l)
            v.bad('kernel splat (%s) on %s' % (', '.join(kinds), c))
    # what a retried run had finished before it crashed must have held too
    for d in sorted(f for f in os.listdir(run) if re.match(r'crashed-\d+$', f)):
        dd = os.path.join(run, d)
        for f in sorted(os.listdir(dd)):
            path = os.path.join(dd, f)
            if f.startswith('kselftest.') and f.endswith('.tap'):
                progs, _, _ = parse_ksft(path)
                for prog, x in progs.items():
                    bad = [c[0] for c in x['cases'] if c[1] == 'fail']
                    if x.get('status') == 'not ok' or bad:
                        v.bad('%s/%s: %s failed before the crash %s' % (d, f, prog, ' '.join(bad)))
            elif f.startswith('liburing.') and f.endswith('.results'):
                for line in read_text(path).splitlines():
                    w = line.split()
                    if len(w) >= 2 and regressed(w[1], (base or {}).get(w[0])) and \
                            w[0] not in exp.flaky:
                        v.bad('%s/%s: %s %s before the crash' % (d, f, w[0], w[1]))
    nlines = len(lines)
    print('dmesg:      %d report line(s) in %d console(s) (%d lines scanned in %s)'
          % (nsplat, len([c for c in consoles if os.path.exists(c)]), nlines,
             os.path.basename(con)))
    if lines and not any(DONE.search(l) for l in lines) and vmrc == '0':
        v.bad('the console does not reach the guest\'s final marker (iou-test: done)')
    ncrash = len([c for c in consoles if os.path.basename(c).startswith('console.crashed-')])
    nboot = len([c for c in consoles if os.path.basename(c).startswith('console.boot-failed-')])
    if ncrash:
        print('retries:    %d run(s) hit the TCG text-patching race and were run again' % ncrash)
    if nboot:
        print('retries:    %d boot(s) hit the TCG text-patching race and were retried' % nboot)
    print('RESULT: %s (%d failure(s))' % ('PASS' if not v.failures else 'FAIL', len(v.failures)))
    # passed and skipped: KUnit cases, kselftest cases and liburing tests;
    # failed: the FAIL lines above
    print('verdict: %d passed, %d failed, %d skipped' % (v.passed, len(v.failures), v.skipped))
    return 1 if v.failures else 0


def race_verdict(lines):
    """(True, why) when a console's crash is the TCG race and nothing else is
    wrong on it (the one crash vm.sh boots again), (False, why) otherwise."""
    a, _, why = race_block(lines)
    if a is None:
        return False, why
    rest = splats(lines, allow_race=True)
    if rest:
        return False, '%s\nother reports on the console: %s' % (why, rest[0][1])
    ktap = [l for l in lines if re.match(r'^\s*not ok \d+ ', TS.sub('', l))]
    if ktap:
        return False, '%s\na KUnit failure on the console: %s' % (why, ktap[0].strip())
    return True, why


def selftest():
    """The race rule on the consoles of tests/verdict/: race-*.console must be
    the TCG race (vm.sh boots again), crash-*.console must not."""
    d = os.path.join(REPO, 'tests', 'verdict')
    names = sorted(n for n in os.listdir(d) if n.endswith('.console'))
    passed = failed = 0
    for n in names:
        want = n.startswith('race-')
        if not want and not n.startswith('crash-'):
            print('FAIL %s: named neither race-* nor crash-*' % n)
            failed += 1
            continue
        got, why = race_verdict(read_console(os.path.join(d, n)))
        if got == want:
            passed += 1
        else:
            failed += 1
            print('FAIL %s: %s (%s)' % (n, 'the race' if got else 'a crash',
                                        why.replace('\n', '; ')))
    print('verdict selftest: %d passed, %d failed, 0 skipped' % (passed, failed))
    return 1 if failed or not names else 0


def main(argv):
    if len(argv) == 3 and argv[0] == 'summary':
        return summary(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == 'race':
        ok, why = race_verdict(read_console(argv[1]))
        print(why)
        return 0 if ok else 1
    if len(argv) == 1 and argv[0] == 'selftest':
        return selftest()
    if len(argv) >= 2 and argv[0] == 'splats':
        for c in argv[1:]:
            for n, l in splats(read_console(c)):
                print('%s: [%s] %s' % (c, n, l))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
