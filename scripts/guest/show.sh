#!/bin/bash
# Guest side of 'make run': show what is running.
echo "kernel:  $(uname -r)"
echo "build:   $(uname -v)"
echo "series:  $(uname -v | sed -n 's/^#\([^ ]*\) .*/\1/p')"
if [ -e /proc/sys/kernel/io_uring_handoff ]; then
	echo "kernel.io_uring_handoff = $(cat /proc/sys/kernel/io_uring_handoff)"
else
	echo "kernel.io_uring_handoff: not present in this kernel"
fi
echo "io_uring_disabled = $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null)"
echo "kunit suites: $(ls /sys/kernel/debug/kunit 2>/dev/null | wc -l)"
