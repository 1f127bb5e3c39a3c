#!/bin/bash
# Guest side of vm.sh: run $RUN/cmd.sh, keep its output and status in $RUN.
RUN=$1
cd "$RUN" || exit 2
: > "$RUN/started"
echo "IOU-VM: $(uname -r) $(uname -v)"
bash "$RUN/cmd.sh" > >(tee "$RUN/stdout") 2> >(tee "$RUN/stderr" >&2)
rc=$?
wait
dmesg > "$RUN/dmesg" 2>/dev/null
echo "$rc" > "$RUN/status"
sync
exit "$rc"
