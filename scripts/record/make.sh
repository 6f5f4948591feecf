#!/bin/sh
# A parallel build: `make -j2` of googletest from /usr/src/googletest
# (configured outside the trace; the build's compilers are vfork'ed and
# exec'ed). Writes $OUT/make.mmtrace.
set -eu
. "$(dirname "$0")/common.sh"
cmake -S /usr/src/googletest -B "$work/build" -G 'Unix Makefiles' -DCMAKE_BUILD_TYPE=Release >/dev/null
"$MMLAB" record --out "$OUT/make.mmtrace" -- make -C "$work/build" -j2 --no-print-directory >/dev/null
