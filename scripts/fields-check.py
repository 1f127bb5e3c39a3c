#!/usr/bin/env python3
"""Check the handoff's classification of task state against a built kernel.

Documentation/io_uring/handoff-fields.rst (in the work tree, added by the
series) classifies every member of struct task_struct, and of x86-64's and
arm64's struct thread_struct, as moves, stays, refused or unrelated. This
reads the members of those structs with pahole from the debug info of the
build (fields-probe/fieldprobe.o, a module object that scripts/build.sh
compiles with -g against the build, or vmlinux if that is missing) and fails
when:

- a member of the built struct is not in the table (unclassified: a new
  field of the next kernel, or one the table missed);
- a member the table lists, under a config that is on in the build's
  .config, is not in the built struct (gone or renamed);
- a member the table lists under a config that is off is in the built struct
  (the table's config is wrong);
- a row is malformed, repeated, or of an unknown class.

Usage: fields-check.py BUILD_DIR TABLE ARCH   (ARCH: x86_64 or arm64)
       fields-check.py --parse-selftest        (the pahole parser on a sample)
Prints one summary line per struct with the counts per class; exit status 0
when every check holds, 1 when one fails, 2 on bad usage or a missing tool.
"""
import os
import re
import shutil
import subprocess
import sys

CLASSES = ('moves', 'stays', 'refused', 'unrelated')
# the table's section titles, and the struct and arch each one is for
SECTIONS = {
    'struct task_struct': ('task_struct', None),
    'x86-64 struct thread_struct': ('thread_struct', 'x86_64'),
    'arm64 struct thread_struct': ('thread_struct', 'arm64'),
}


def die(msg, code=2):
    print('fields-check: %s' % msg, file=sys.stderr)
    sys.exit(code)


def parse_table(path):
    """{section title: [(member, class, config, why, line number)]}"""
    if not os.path.exists(path):
        die('%s: no such file (is the series assembled? make assemble)' % path)
    with open(path) as f:
        lines = f.read().split('\n')
    tables, title, rows, state = {}, None, None, 0
    for i, line in enumerate(lines):
        # a section title: the line before an underline of '-' or '='
        if i + 1 < len(lines) and re.fullmatch(r'[-=~]{4,}', lines[i + 1]) and line.strip():
            if line.strip() in SECTIONS:
                title, rows, state = line.strip(), [], 0
                tables[title] = rows
            else:
                title = None
            continue
        if title is None:
            continue
        # a simple table: '====' border, header, '====' border, rows, '====' border
        if re.fullmatch(r'=+( +=+)+ *', line):
            if state == 0:
                cols = [m.start() for m in re.finditer(r'=+', line)]
            state += 1
            if state == 3:
                title = None
            continue
        if state != 2 or not line.strip():
            continue
        if line[:1] == ' ':
            continue  # continuation of the last column
        cells = [line[cols[k]:cols[k + 1]].strip() if k + 1 < len(cols) else line[cols[k]:].strip()
                 for k in range(len(cols))]
        if len(cells) != 4:
            die('%s:%d: expected 4 columns: %s' % (path, i + 1, line))
        member = cells[0].strip('`')
        rows.append((member, cells[1], cells[2], cells[3], i + 1))
    for t in SECTIONS:
        if t not in tables:
            die('%s: no table under the title "%s"' % (path, t))
    return tables


def read_config(build):
    path = os.path.join(build, '.config')
    if not os.path.exists(path):
        die('%s: no such file (build the kernel first: make build)' % path)
    on = set()
    with open(path) as f:
        for line in f:
            m = re.match(r'(CONFIG_\w+)=[ym]', line)
            if m:
                on.add(m.group(1))
    return on


def config_true(expr, on):
    """'-', CONFIG_A, !CONFIG_A, A&&B, A||B (|| binds weaker than &&)."""
    if expr in ('-', ''):
        return True
    for alt in expr.split('||'):
        if all((t.strip()[1:] not in on) if t.strip().startswith('!') else (t.strip() in on)
               for t in alt.split('&&')):
            return True
    return False


def pahole_members(text):
    """Member names of the first struct in pahole's output, with the members
    of anonymous structs and unions flattened as C accesses them."""
    stack = [[]]  # members collected per nesting level
    started = False
    for raw in text.split('\n'):
        line = re.sub(r'/\*.*?\*/', '', raw).strip()
        if not line:
            continue
        if not started:
            if line.endswith('{'):
                started = True
            continue
        if re.fullmatch(r'(struct|union)( \w+)? ?\{', line):
            stack.append([])
            continue
        m = re.fullmatch(r'\}( *(\w+)(\[[^\]]*\])*)?( __attribute__\(\(.*\)\))? *;', line)
        if m:
            if len(stack) == 1:
                break  # the end of the struct
            inner = stack.pop()
            if m.group(2):
                stack[-1].append(m.group(2))  # a named member of an anonymous type
            else:
                stack[-1].extend(inner)       # anonymous: its members are the struct's
            continue
        if line.startswith('}'):
            break
        if not line.endswith(';'):
            continue
        decl = line[:-1]
        decl = re.sub(r'__attribute__\(\(.*\)\)', '', decl).strip()
        fp = re.search(r'\(\s*\*\s*(\w+)\s*\)\s*\(', decl)  # function pointer
        if fp:
            stack[-1].append(fp.group(1))
            continue
        if re.search(r'\s:\s*\d+$', decl):            # an unnamed bitfield ('unsigned :0')
            stack[-1].append(':' + decl.rsplit(':', 1)[1].strip())
            continue
        decl = re.sub(r':\s*\d+$', '', decl)         # bitfield width
        decl = re.sub(r'(\[[^\]]*\])+$', '', decl)   # array dimensions
        m = re.search(r'(\w+)\s*$', decl)
        if m:
            stack[-1].append(m.group(1))
    return stack[0]


PARSE_SAMPLE = '''struct task_struct {
	struct thread_info         thread_info;          /*     0    24 */
	unsigned int               __state;              /*    24     4 */
	unsigned int               sched_reset_on_fork:1; /*  1000: 0  4 */
	unsigned int               :0;
	char                       comm[16];             /*  1100    16 */
	union {
		refcount_t         rcu_users;            /*  2440     4 */
		struct callback_head rcu;                /*  2440    16 */
	};                                               /*  2440    16 */
	struct {
		int                a;                    /*     0     4 */
	} named_anon;                                    /*  2460     4 */
	void                       (*fn)(int);           /*  2470     8 */
	struct thread_struct       thread __attribute__((__aligned__(64))); /*  2496  4224 */

	/* size: 6720, cachelines: 105, members: 9 */
};
'''


def parse_selftest():
    got = pahole_members(PARSE_SAMPLE)
    want = ['thread_info', '__state', 'sched_reset_on_fork', ':0', 'comm', 'rcu_users', 'rcu',
            'named_anon', 'fn', 'thread']
    if got != want:
        print('fields-check parse selftest: FAIL: got %s, want %s' % (got, want))
        return 1
    print('fields-check parse selftest: 1 passed, 0 failed')
    return 0


def check(build, table_path, arch):
    if not shutil.which('pahole'):
        die('pahole not found: install the Debian package dwarves')
    # the kernel's debug info, or the probe object build.sh makes when the
    # kernel has none (the test kernels)
    vmlinux = os.path.join(build, 'fields-probe', 'fieldprobe.o')
    if not os.path.exists(vmlinux):
        vmlinux = os.path.join(build, 'vmlinux')
    if not os.path.exists(vmlinux):
        die('%s: no such file (build the kernel first: make build)' % vmlinux)
    on = read_config(build)
    tables = parse_table(table_path)
    failed = 0
    for title, (struct, tarch) in SECTIONS.items():
        if tarch not in (None, arch):
            continue
        out = subprocess.run(['pahole', '-C', struct, vmlinux], capture_output=True, text=True)
        if out.returncode or not out.stdout.strip():
            die('pahole -C %s %s: %s' % (struct, vmlinux, out.stderr.strip() or 'no output'))
        built = pahole_members(out.stdout)
        rows = tables[title]
        seen, counts, bad = {}, dict.fromkeys(CLASSES, 0), []
        for member, cls, cfg, why, ln in rows:
            if cls not in CLASSES:
                bad.append('line %d: %s: unknown class "%s" (%s)' % (ln, member, cls, '|'.join(CLASSES)))
            if member in seen:
                bad.append('line %d: %s: listed again (first at line %d)' % (ln, member, seen[member]))
            if not why:
                bad.append('line %d: %s: no how or why' % (ln, member))
            seen[member] = ln
        present = set(built)
        for member, cls, cfg, why, ln in rows:
            want = config_true(cfg, on)
            if want and member not in present:
                bad.append('line %d: %s: classified (config %s, on), but not in the built struct: '
                           'gone or renamed' % (ln, member, cfg))
            elif not want and member in present:
                bad.append('line %d: %s: in the built struct, but its config (%s) is off in %s/.config'
                           % (ln, member, cfg, build))
            elif want and cls in counts:
                counts[cls] += 1
        for member in built:
            if member not in seen:
                bad.append('%s: in the built struct, not classified' % member)
        print('fields: %s (%s): %d members built; moves %d, stays %d, refused %d, unrelated %d; '
              '%d problem(s)' % (title, arch, len(built), counts['moves'], counts['stays'],
                                 counts['refused'], counts['unrelated'], len(bad)))
        for b in bad:
            print('  FAIL: %s: %s' % (os.path.basename(table_path), b))
        failed += len(bad)
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ['--parse-selftest']:
        return parse_selftest()
    if len(sys.argv) != 4 or sys.argv[3] not in ('x86_64', 'arm64'):
        die('usage: fields-check.py BUILD_DIR TABLE x86_64|arm64')
    return check(*sys.argv[1:])


if __name__ == '__main__':
    sys.exit(main())
