#!/bin/sh
# sqlite3 with a 256 MiB mmap_size: a 100 MiB database read through the
# mapping and updated; no fork, so no CoW policy may differ (the control).
# The database is made outside the trace. Writes $OUT/sqlite.mmtrace.
set -eu
. "$(dirname "$0")/common.sh"
db="$work/t.db"
sqlite3 "$db" "CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);
  WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
  INSERT INTO t SELECT x, randomblob(400) FROM c;"
"$MMLAB" record --out "$OUT/sqlite.mmtrace" -- sqlite3 "$db" \
  "PRAGMA mmap_size=268435456;" "SELECT sum(length(v)) FROM t;" \
  "UPDATE t SET v = randomblob(400) WHERE k % 10 = 0;" "SELECT count(*) FROM t WHERE v > x'80';" >/dev/null
